"""The staged rows of two `ingest_stages.py` runs, row for row: are two versions' stagings of one file the same?

docs/benchmarks.md's "Same rows" check of issue 52's ingest changes (committed for review 57 N13: it ran as an
uncommitted scratch script). For each kind of staged file (valid rows, rejected rows with their reasons and raw
text, failed files) under each run's `--workdir`'s `staged-stages/`: the rows of each run and the rows of one not in
the other, both ways (`EXCEPT ALL`, duplicates counted), every column but the staged file's path. The time rule's
reason quotes the run's own clock (`after 2026-11-29 05:57 UTC`): masked, as two runs minutes apart differ there.

    .venv/bin/python tests/benchmarks/same_staged_rows.py WORKDIR_A WORKDIR_B

(WORKDIR_*: the `--workdir` of two `tests/benchmarks/ingest_stages.py --rows N` runs, e.g. the code before and now.)
"""

from __future__ import annotations

import argparse

CLOCK = r"after [0-9-]+ [0-9:]+ UTC"


def query(workdir: str, kind: str) -> str:
    """The staged rows of `kind` under `workdir`, without the file's path (and the clock masked in the reasons)."""
    masked = (f", list_transform(reasons, lambda x: regexp_replace(x, '{CLOCK}', 'after <clock> UTC')) AS reasons"
              if kind == "rejected" else "")
    drop = "source_file, reasons" if masked else "source_file"
    return f"SELECT * EXCLUDE ({drop}){masked} FROM read_parquet('{workdir}/staged-stages/{kind}-*.parquet')"


def main() -> None:
    import duckdb

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    args = ap.parse_args()
    con = duckdb.connect()
    for kind in ("valid", "rejected", "failed"):
        qa, qb = query(args.a, kind), query(args.b, kind)
        na, nb = (con.execute(f"SELECT count(*) FROM ({q})").fetchone()[0] for q in (qa, qb))
        only_a = con.execute(f"SELECT count(*) FROM (({qa}) EXCEPT ALL ({qb}))").fetchone()[0]
        only_b = con.execute(f"SELECT count(*) FROM (({qb}) EXCEPT ALL ({qa}))").fetchone()[0]
        print(f"{kind}: rows {na:,} / {nb:,}; differing {only_a} / {only_b}")


if __name__ == "__main__":
    main()
