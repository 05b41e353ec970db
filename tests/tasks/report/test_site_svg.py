"""The page's charts are drawn once each, cropped as `savefig(bbox_inches="tight")` crops (tasks/report/site.py `_svg`)."""

from __future__ import annotations

import io
import re

from gpucast.tasks.report.site import _figure, _svg

SIZE = re.compile(r'<svg[^>]* width="([\d.]+)pt" height="([\d.]+)pt" viewBox="([-\d. ]+)"')


def chart():
    """Two panels whose labels reach past the axes (a long title, a wide y label): the tight box is not the figure."""
    fig, axes = _figure((6, 2.5), 2)
    for k, ax in enumerate(axes[0]):
        ax.bar(range(5), [1, 4, 2, 8, 5], label="known P50")
        ax.set_title(f"a queue with a long name {k} · A100-80GB", fontsize=9)
    axes[0][0].set_ylabel("GPU-hours per day (P50, bar P10-P90)")
    axes[0][0].legend(fontsize=7, frameon=False)
    return fig


def test_a_chart_is_drawn_once_and_cropped_as_bbox_tight_crops():
    fig, draws = chart(), []
    fig.canvas.mpl_connect("draw_event", lambda event: draws.append(event))
    width, height, view = SIZE.search(_svg(fig)).groups()
    assert len(draws) == 1  # savefig(bbox_inches="tight") draws twice: to measure, then to write

    tight = io.StringIO()
    chart().savefig(tight, format="svg", bbox_inches="tight")
    want_w, want_h, _ = SIZE.search(tight.getvalue()).groups()
    assert abs(float(width) - float(want_w)) < 0.01 and abs(float(height) - float(want_h)) < 0.01  # points
    x0, y0, w, h = map(float, view.split())
    assert (w, h) == (float(width), float(height)) and (x0, y0) != (0, 0)  # the view is the drawn part, not the figure
    assert float(width) < 6 * 72  # narrower than the figure: the right panel's title ends inside it


def test_a_header_the_crop_does_not_recognise_falls_back_to_matplotlibs_crop(monkeypatch):
    import gpucast.tasks.report.site as site

    monkeypatch.setattr(site, "_SIZE", re.compile(r"<svg(never)"))  # as if matplotlib wrote its header otherwise
    width, height, _ = SIZE.search(_svg(chart())).groups()
    tight = io.StringIO()
    chart().savefig(tight, format="svg", bbox_inches="tight")
    want_w, want_h, _ = SIZE.search(tight.getvalue()).groups()
    assert (width, height) == (want_w, want_h) and float(width) < 6 * 72  # cropped, not the full figure
