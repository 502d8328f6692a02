"""The closing tally of `make reproduce-all`: results, figures and where they are, what did not run and why."""

from __future__ import annotations

import json

from reproduce.tally import tally


def _target(out, name, rows, figures=(), summary=None):
    folder = out / name
    folder.mkdir(parents=True)
    (folder / "rows.json").write_text(json.dumps(rows))
    for figure in figures:
        (folder / figure).write_bytes(b"\x89PNG")
    if summary is not None:
        (folder / "summary.json").write_text(json.dumps(summary))


def test_the_tally_names_results_figures_and_every_reason_something_did_not_run(tmp_path):
    out = tmp_path / "reproduction"
    _target(out, "fig5", [{"ours": 0.02}, {"ours": None, "not_run": "needs the paper's 5,000 epochs"}, {"ours": None}],
            ["fig5_critical.png"])
    _target(out, "rllc", [{"ours": None, "note": "not run: devinterp is not installed (pip install -e '.[llc]')"}],
            summary={"undefined": "undefined: devinterp is not installed (pip install -e '.[llc]')"})
    text = tally(out, "smoke", ["fig5", "rllc", "fig9"], {"fig9": "no records"}, {"canonical": "part of Fig. 2"},
                 out / "REPORT.md", 12.4)
    lines = text.splitlines()
    assert lines[0] == "== reproduce-all (smoke): 3 targets in 12 min =="
    assert any(line.split()[:3] == ["fig5", "1/3", "fig5/fig5_critical.png"] for line in lines)
    assert any(line.split()[:3] == ["rllc", "0/1", "-"] for line in lines)
    assert "  fig5: needs the paper's 5,000 epochs" in lines and "  fig5: 1 row without a number (REPORT.md says why)" in lines
    rllc = [line for line in lines if line.startswith("  rllc: devinterp")]
    assert len(rllc) == 1 and "make reproduce-rllc" in rllc[0]  # one reason, said once, with what to do about it
    assert "  fig9: no records" in lines and "  canonical: not in the smoke profile: part of Fig. 2" in lines
    assert lines[-1] == f"report, every claim with its verdict: {out / 'REPORT.md'}"
