"""tools/suite_budget.py: the suite's time budget per test file, checked after `make test`."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from suite_budget import check, file_times, load_budget, main  # noqa: E402


def test_every_test_file_has_a_budget_and_they_fit_the_total():
    total, budget = load_budget()
    files = {p.name for p in (ROOT / "tests").glob("test_*.py")}
    assert set(budget) == files  # (a new file states its cost; a removed one gives its budget back)
    assert sum(budget.values()) <= total and all(s > 0 for s in budget.values())


def test_a_file_over_its_budget_fails_after_scaling_by_the_boxs_speed():
    budget = {"test_a.py": 100.0, "test_b.py": 200.0, "test_c.py": 50.0, "test_d.py": 20.0}
    # a box 2x slower: every file at twice its budget passes
    errors, lines = check({k: 2 * v for k, v in budget.items()}, 400.0, budget)
    assert errors == [] and "this box at 2.00 x" in lines[0] and "740 s of tests in 4 files" in lines[0]
    # on that box, one file that grew past 2 x (1 + 50%) x 100 s + 20 s = 320 s fails, naming itself
    errors, _ = check({**{k: 2 * v for k, v in budget.items()}, "test_a.py": 330.0}, 400.0, budget)
    assert len(errors) == 1 and errors[0].startswith("tests/test_a.py: 330 s, over its budget of 100 s x 2.00")
    assert check({**{k: 2 * v for k, v in budget.items()}, "test_a.py": 319.0}, 400.0, budget)[0] == []
    # a file with no budget line, and budgets that add up past the total
    errors, _ = check({**budget, "test_e.py": 12.0}, 300.0, budget)
    assert errors[0].startswith("tests/budget.toml: the files' budgets add up to 370 s, over total_s = 300")
    assert errors[1].startswith('tests/test_e.py: no budget in tests/budget.toml; add `"test_e.py" = 12`')
    # part of the suite: reported, not checked
    errors, lines = check({"test_a.py": 900.0}, 400.0, budget)
    assert errors == [] and lines == ["test budget: not checked (1 of 4 budgeted files ran)"]


def test_times_are_summed_per_file_from_the_junit_report(tmp_path, capsys):
    report = tmp_path / "r.xml"
    report.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_laws" name="a" time="1.5"/>'
        '<testcase classname="tests.test_laws" name="b[x]" time="2.25"/>'
        '<testcase classname="tests.test_plot.TestGroup" name="c" time="4"/>'
        '<testcase classname="" name="tests.test_broken" time="0.1"/>'
        "</testsuite></testsuites>")
    assert file_times(report) == {"test_laws.py": 3.75, "test_plot.py": 4.0}
    assert main([str(report), "--write"]) == 0
    assert capsys.readouterr().out == '"test_plot.py" = 4\n"test_laws.py" = 4\n'
    assert main([str(tmp_path / "missing.xml")]) == 2
    assert "missing.xml: no such report" in capsys.readouterr().err
    (tmp_path / "cut.xml").write_text('<?xml version="1.0"?><testsuites><testsuite name="pytest">')  # (killed midway)
    assert main([str(tmp_path / "cut.xml")]) == 2
    assert capsys.readouterr().err.startswith(f"test budget: {tmp_path / 'cut.xml'}: not a JUnit XML report (")


def test_a_bad_budget_file_is_one_line(tmp_path, capsys, monkeypatch):
    import suite_budget

    report = tmp_path / "r.xml"
    report.write_text('<testsuites><testsuite><testcase classname="tests.test_laws" name="a" time="1"/></testsuite>'
                      "</testsuites>")
    for text in ("total_s = 10\n", 'total_s = 10\n[files]\n"test_laws.py" = "ten"\n', "total_s = \n"):
        (tmp_path / "budget.toml").write_text(text)
        monkeypatch.setattr(suite_budget, "BUDGET", tmp_path / "budget.toml")
        assert main([str(report)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"test budget: {tmp_path / 'budget.toml'}: unreadable (") and err.count("\n") == 1
