"""What people read: text and Markdown tables, training charts, the nightly report, the planners' HTML page."""
