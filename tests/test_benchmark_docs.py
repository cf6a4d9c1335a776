"""The docs' benchmark tables are what their committed JSON regenerates
(`make benchmark-docs`), and every number of the README's and the
headline's generated rows has a result behind it."""

import json
import os
import re
import shutil

import pytest

from benchmarks import docs_plots
from benchmarks import docs_tables
from benchmarks import machine

ROOT = docs_tables.ROOT
# The generated regions whose rows name their sources: each number in them
# must be held by one of those results (or be a stated set-up value).
BACKED = ("headline", "readme-goals", "readme-mechanisms")
PROVENANCE_KEYS = ("provenance", "command", "machine", "date", "load")


def _read(document):
    with open(os.path.join(ROOT, document), encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("document", [d for d in docs_tables.DOCUMENTS
                                      if os.path.exists(os.path.join(ROOT,
                                                                     d))])
def test_committed_tables_are_what_their_json_regenerates(document):
    text = _read(document)
    stale = [name for name in docs_tables.regions(text)
             if docs_tables.regenerate_one(text, name) != text]
    assert not stale, (f"{document}: these tables differ from their JSON in "
                       f"benchmarks/results/ (run `make benchmark-docs`): "
                       f"{stale}")
    assert docs_tables.regenerate(text) == text


def test_the_headline_and_the_readme_tables_are_generated():
    assert "headline" in docs_tables.regions(_read("docs/benchmarks.md"))
    readme = docs_tables.regions(_read("README.md"))
    assert {"readme-goals", "readme-mechanisms"} <= set(readme)


def test_every_region_has_a_result_that_says_where_it_comes_from():
    for document in docs_tables.DOCUMENTS:
        path = os.path.join(ROOT, document)
        if not os.path.exists(path):
            continue
        for name in docs_tables.regions(_read(document)):
            record = docs_tables.load(name)
            assert record["name"] == name
            missing = [k for k in PROVENANCE_KEYS if k not in record]
            assert not missing, f"{name}.json lacks {missing}"
            assert record["provenance"] == "measured" or \
                record["provenance"].startswith(("transcribed", "rows ")), \
                f"{name}.json: provenance {record['provenance']!r}"


@pytest.mark.parametrize("name", BACKED)
def test_every_number_of_a_readme_or_headline_row_has_json_behind_it(name):
    record = docs_tables.load(name)
    rows, sources = record["table"]["rows"], record["table"]["sources"]
    assert len(sources) == len(rows)
    assert all(sources), f"{name}: a row names no result it comes from"
    assert docs_tables.unbacked_numbers(record) == []


def test_a_changed_result_makes_its_table_stale(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(docs_tables.RESULTS, results)
    text = _read("docs/benchmarks.md")
    path = results / "headline.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    cell = record["table"]["rows"][0][1]
    assert "0.628" in cell
    record["table"]["rows"][0][1] = cell.replace("0.628", "0.629")
    path.write_text(json.dumps(record), encoding="utf-8")
    assert docs_tables.regenerate_one(text, "headline", str(results)) != text
    assert docs_tables.regenerate_one(text, "pretraining-cost",
                                      str(results)) == text
    assert docs_tables.main(["--check", "--results", str(results)]) == 1
    assert docs_tables.main(["--check"]) == 0


def test_a_number_no_source_holds_is_reported():
    record = {"table": {"columns": ["what", "result"],
                        "rows": [["AG, eps 0.5", "bound 0.594"],
                                 ["AG, eps 0.5", "bound 0.611"]],
                        "sources": [["ag_limit"], ["ag_limit"]]}}
    assert docs_tables.unbacked_numbers(record) == [(1, 0.611)]
    record["table"]["settings"] = [[], [0.611]]
    assert docs_tables.unbacked_numbers(record) == []
    record["table"]["sources"][0] = ["no-such-result"]
    assert docs_tables.unbacked_numbers(record)[0][0] == 0


def test_numbers_are_read_as_the_docs_write_them():
    found = docs_tables.numbers(
        "SST-2 at eps 1: 0.628 (+0.017 ± 0.014, -0.035), 10,493 words/s, "
        "5.8x, 92%, 2.98 ms, int8 p50, 10^5 releases, delta 1e-8.")
    assert found == {1.0, 0.628, 0.017, 0.014, 0.035, 10493.0, 5.8, 92.0,
                     2.98, 100000.0, 1e-8}


def test_write_json_keeps_the_result_with_its_provenance(tmp_path,
                                                         monkeypatch):
    monkeypatch.setattr(machine, "RESULTS", str(tmp_path / "results"))
    copy = tmp_path / "runs" / "out.json"
    written = machine.write_json(
        str(copy), {"rate": [1.0, 2.0]},
        argv=["benchmarks/some_bench.py", "--threads=1", "--only=dchi"])
    assert os.path.basename(written) == "some_bench.json"
    with open(written) as f:
        record = json.load(f)
    assert record["result"] == {"rate": [1.0, 2.0]}
    assert record["command"].endswith(
        "benchmarks/some_bench.py --threads=1 --only=dchi")
    assert record["provenance"] == "measured"
    assert len(record["load"]) == 3 and record["machine"]
    assert record["date"].endswith("Z")
    with open(copy) as f:
        assert json.load(f) == {"rate": [1.0, 2.0]}
    with pytest.raises(ValueError, match="name"):
        machine.write_json(None, {}, name="../escape")


def test_the_machine_names_its_cpu_model_and_vector_width(tmp_path):
    info = tmp_path / "cpuinfo"
    core = ("processor\t: {i}\ncpu family\t: 25\nmodel\t\t: {m}\n"
            "model name\t: AMD EPYC\nflags\t\t: fpu sse2 avx avx2 {x}\n\n")
    info.write_text(core.format(i=0, m=17, x="avx512f avx512bw") +
                    core.format(i=1, m=17, x="avx512f avx512bw"))
    cores = os.cpu_count()
    assert machine.cpu_name(str(info)) == (
        f"AMD EPYC (family 25, model 17; AVX-512), {cores} cores")
    info.write_text(core.format(i=0, m=1, x=""))
    assert machine.cpu_name(str(info)) == (
        f"AMD EPYC (family 25, model 1; AVX2, no AVX-512), {cores} cores")
    assert machine.cpu_name(str(tmp_path / "missing")).endswith(
        f", {cores} cores")


def test_the_commit_ignores_results_written_by_the_run(tmp_path,
                                                       monkeypatch):
    # A run that writes two results: the second record's commit is still
    # the checkout's; a changed script is "+changes".
    import subprocess

    def git(*args):
        return subprocess.run(["git", "-C", str(tmp_path), *args],
                              check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "a.json").write_text("{}\n")
    (tmp_path / "benchmarks" / "bench.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    head = git("rev-parse", "HEAD")
    monkeypatch.setattr(machine, "ROOT", str(tmp_path))
    (tmp_path / "benchmarks" / "results" / "a.json").write_text("{1}\n")
    assert machine.git_commit() == head
    (tmp_path / "benchmarks" / "bench.py").write_text("x = 2\n")
    assert machine.git_commit() == head + "+changes"


def test_the_readme_pretraining_summary_has_json_behind_every_number():
    text = _read("README.md")
    start = text.index("- [Privacy-adaptive pretraining]")
    paragraph = text[start:text.index("\n- [", start + 1)]
    paragraph = paragraph.split("([benchmark](")[0]  # the link's anchor
    assert docs_tables.unbacked_in_text(paragraph, [
        "pretraining-token-rep", "pretraining-text-to-text",
        "pretraining-summary", "pretraining-runs",
        "pretraining-budget"]) == []


def test_every_committed_result_says_where_it_comes_from():
    names = sorted(n[:-len(".json")] for n in os.listdir(docs_tables.RESULTS)
                   if n.endswith(".json"))
    assert names
    for name in names:
        record = docs_tables.load(name)
        assert record["name"] == name
        missing = [k for k in PROVENANCE_KEYS if k not in record]
        assert not missing, f"{name}.json lacks {missing}"


def test_every_plot_is_what_its_json_draws():
    """docs/img/*.png as `make benchmark-docs` draws them from their JSON,
    byte for byte with the matplotlib that drew them (the PNG names it;
    another version may draw other bytes, and then each plot must still
    draw), and every plot the benchmark pages show is one of them."""
    installed = docs_plots._software()
    drawn = {name: docs_plots.drawn_with(os.path.join(docs_plots.IMG, name))
             for name in docs_plots.PLOTS}
    assert all(v and v.startswith("matplotlib ") for v in drawn.values())
    same = [name for name, version in drawn.items() if version == installed]
    assert set(docs_plots.stale()) & set(same) == set()
    for name in set(docs_plots.PLOTS) - set(same):
        assert docs_plots.draw(name).startswith(b"\x89PNG")
    for name, (_, sources) in docs_plots.PLOTS.items():
        for source in sources:
            docs_tables.load(source)
    shown = set()
    for document in docs_tables.DOCUMENTS[1:]:
        shown |= set(re.findall(r"\(img/([\w.-]+\.png)\)",
                                _read(document)))
    assert shown and shown <= set(docs_plots.PLOTS)


def test_recording_keeps_the_printed_tables(tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "RESULTS", str(tmp_path))
    with machine.recording(name="printed", argv=["benchmarks/x.py"]):
        print("2026-11-27; a note\n\n| a | b |\n|---|---|\n| 1 | 2.5 |\n"
              "| 3 | - |\n\nafter")
    record = docs_tables.load("printed", str(tmp_path))
    assert record["result"]["tables"] == [
        {"columns": ["a", "b"], "rows": [["1", "2.5"], ["3", "-"]]}]
    assert record["result"]["printed"].endswith("after\n")
    with pytest.raises(RuntimeError):
        with machine.recording(name="failed", argv=["benchmarks/x.py"]):
            raise RuntimeError("no result kept")
    assert not (tmp_path / "failed.json").exists()
    # Tables named for the docs: each its own table result, in order.
    with machine.recording(name="two", argv=["benchmarks/x.py"],
                           table_names=["", "second-table"]):
        print("| a |\n|---|\n| 1 |\n\n| b | c |\n|---|---|\n| 2 | 3 |")
    second = docs_tables.load("second-table", str(tmp_path))
    assert second["kind"] == "table" and second["result"] == {"from": "two"}
    assert docs_tables.render("second-table", str(tmp_path)) == \
        "| b | c |\n|---|---|\n| 2 | 3 |"
    assert not (tmp_path / ".json").exists()
    with pytest.raises(ValueError, match="2 table names"):
        with machine.recording(name="few", argv=["benchmarks/x.py"],
                               table_names=["x", "y"]):
            print("| a |\n|---|\n| 1 |")


def test_a_changed_result_changes_its_plot(monkeypatch):
    name = "dpnr-table-2-analogue-ag-accuracy-vs-eps"
    before = docs_plots.draw("dpnr_ag_eps.png")
    record = docs_tables.load(name)
    record["table"]["rows"][1][1] = "52.3"  # eps 0.05: 32.3 in the docs
    load = docs_tables.load
    monkeypatch.setattr(docs_tables, "load", lambda n, *a: record
                        if n == name else load(n, *a))
    assert docs_plots.draw("dpnr_ag_eps.png") != before


def test_the_readme_suite_figure_is_the_recorded_run():
    from benchmarks import suite_time

    log = ("= 1126 passed, 2 skipped, 2 warnings in 1143.69s (0:19:03) =\n"
           "\tUser time (seconds): 1932.22\n\tSystem time (seconds): 170.10\n"
           "\tElapsed (wall clock) time (h:mm:ss or m:ss): 19:05.07\n"
           "\tExit status: 0\n")
    parsed = suite_time.parse(log)
    assert (parsed["passed"], parsed["skipped"], parsed["failed"]) == \
        (1126, 2, 0)
    assert parsed["cpu_minutes"] == 35.0 and parsed["wall_seconds"] == \
        pytest.approx(1145.07)
    recorded = docs_tables.load("suite_time")["result"]
    text = _read("README.md")
    assert recorded["exit_status"] == 0 and recorded["failed"] == 0
    assert f"{recorded['cpu_minutes']:.1f} CPU-minutes" in text
    assert f"{recorded['passed']:,} tests passed" in text
