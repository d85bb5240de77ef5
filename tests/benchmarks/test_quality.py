"""`benchmarks/quality.py` at wall-time marks: which marks, which saved state each one scores
(a Gantry row's checkpoints by file time, a baseline's call-boundary snapshots), and the
per-mark tables and figure built from the results."""

import json
import os
import re

import keras
import pytest
import tensorflow as tf

from benchmarks import quality, quality_report, recipes

RESULTS = {
    "reference": {"timeline": [{"minutes": 1, "seconds": 59.2, "steps": 40, "fid": 310.0,
                                "precision": 0.01, "recall": 0.0},
                               {"minutes": 2, "seconds": 121.0, "steps": 100, "fid": 250.5,
                                "precision": 0.2, "recall": 0.0}]},
    "dcgan": {"timeline": [{"minutes": 1},
                           {"minutes": 2, "seconds": 123.4, "steps": 900, "fid": 40.25,
                            "precision": 0.5, "recall": 0.61}]},
}


def test_marks_step_by_the_period_and_end_at_the_budget():
    assert quality.marks(10, 2) == [2, 4, 6, 8, 10]
    assert quality.marks(10, 3) == [3, 6, 9, 10]
    assert quality.marks(2, 1) == [1, 2]
    assert quality.marks(1, 2) == [1]
    assert quality.marks(10, 0) == [10]


def test_a_mark_scores_the_newest_checkpoint_written_by_then(tmp_path):
    checkpoint = tf.train.Checkpoint(step=tf.Variable(0))
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path / "checkpoints"), max_to_keep=10)
    started = 1_000_000.0
    for step, seconds in ((100, 30.0), (200, 59.5), (300, 61.0)):
        path = manager.save(checkpoint_number=step)
        os.utime(f"{path}.index", (started + seconds, started + seconds))
    saved = quality.saved_checkpoints(str(tmp_path), started)
    assert saved == [(30.0, 100), (59.5, 200), (61.0, 300)]
    assert quality.newest_at(saved, 60.0) == (59.5, 200)
    assert quality.newest_at(saved, 61.0) == (61.0, 300)
    assert quality.newest_at(saved, 29.0) is None


class CountingRecipe:
    """A generator whose first weight counts the steps trained."""

    batch_size, latent_dim = 2, 3

    def __init__(self):
        self.generator = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        self.generator.weights[0].assign(tf.zeros((3, 2)))

    def train_step(self, images):
        kernel = self.generator.weights[0]
        kernel.assign_add(tf.ones_like(kernel))


def test_a_baseline_keeps_its_state_at_the_last_call_boundary_before_each_mark():
    """A clock ticking 1 s per read: boundaries at 0, 1, 2, ... s, 20 steps per call. Mark 1.5
    keeps the state of second 1 (20 steps), mark 3 that of second 3 (60 steps); the deadline
    5.5 stops after the call that starts at 5."""
    ticks = iter(range(100))
    recipe = CountingRecipe()
    steps, snapshots = recipes.train_until(
        recipe, tf.data.Dataset.from_tensors(0.0).repeat(), deadline=5.5, started=0.0,
        marks=[3.0, 1.5, 9.0], clock=lambda: float(next(ticks)))
    assert steps == 120 and recipe.generator.weights[0].numpy()[0, 0] == 120
    assert [(s.mark, s.seconds, s.steps) for s in snapshots] == [(1.5, 1.0, 20), (3.0, 3.0, 60)]
    assert [s.weights[0][0, 0] for s in snapshots] == [20, 60]
    assert recipes.mark_path("/w/samples.npy", 60.0) == "/w/samples-60s.npy"


def test_the_per_mark_tables_have_a_column_per_mark_and_dashes_for_nothing_saved():
    tables = quality_report.format_timeline(RESULTS).split("\n\n")
    assert [table.splitlines()[0].split() for table in tables] == [
        ["FID", "1", "min", "2", "min"], ["precision", "1", "min", "2", "min"],
        ["recall", "1", "min", "2", "min"]]
    assert tables[0].splitlines()[1].split() == ["reference", "310.000", "250.500"]
    assert tables[0].splitlines()[2].split() == ["dcgan", "-", "40.250"]


def test_the_figure_draws_every_row_in_each_of_the_three_panels(tmp_path):
    path = tmp_path / "figures" / "q.png"
    drawn = quality_report.plot_timeline(RESULTS, str(path), title="smoke")
    assert drawn == {"FID": ["reference", "dcgan"], "precision": ["reference", "dcgan"],
                     "recall": ["reference", "dcgan"]}
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fid_ticks_label_a_narrow_range_as_well_as_a_wide_one():
    """The 60-minute run's FID from 10.2 to 18.7 once had one label (10) on its axis."""
    assert quality_report.fid_ticks(9.0, 320.0) == [10, 20, 50, 100, 200]
    assert quality_report.fid_ticks(9.8, 19.2) == [10, 12, 14, 16, 18]
    assert quality_report.fid_ticks(14.3, 15.1) == [14.4, 14.6, 14.8, 15.0]


@pytest.mark.parametrize("flags", [["--minutes", "0"], ["--eval_minutes", "-1"],
                                   ["--checkpoint_every", "0"], ["--ema_halflife_kimg", "-1"]])
def test_bad_budgets_are_refused(flags, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["quality.py", *flags])
    with pytest.raises(SystemExit):
        quality.parse_args()
    assert "--minutes must be positive" in capsys.readouterr().err


def test_an_ema_row_trains_once_and_is_scored_raw_and_averaged(monkeypatch):
    monkeypatch.setattr("sys.argv", ["quality.py", "--no_reference", "--presets", "dcgan",
                                     "--ema_halflife_kimg", "10"])
    args = quality.parse_args()
    assert args.rows == [quality.Row("dcgan", ("--setup=dcgan", "--ema_halflife_kimg=10",
                                               "--ema_rampup=0.05"))]
    assert quality.ema_label(args.rows[0].label) == "dcgan + EMA"


@pytest.mark.parametrize("flags, labels", [
    ([], ["reference", "strong", "dcgan"]),  # the default run
    (["--no_reference", "--row", "strong"], ["strong"]),  # one seed of a baseline, on one core
    (["--no_reference"], ["dcgan"]),
])
def test_the_rows_are_those_asked_for_and_dcgan_only_when_none_is(flags, labels, monkeypatch):
    monkeypatch.setattr("sys.argv", ["quality.py", *flags])
    assert [row.label for row in quality.parse_args().rows] == labels


def test_a_long_run_halves_its_ten_minute_fid_and_never_worsens_beyond_the_seed_noise():
    timeline = [{"minutes": 10, "fid": 20.0}, {"minutes": 20, "fid": 22.0},
                {"minutes": 40, "fid": 26.0}, {"minutes": 60, "fid": 9.0}]
    checks = quality.long_run_checks("dcgan", timeline)
    assert [passed for _, passed in checks] == [True, True, False, True]
    assert checks[0][0] == "dcgan FID 9.00 at 60 min <= its 10-min FID / 2 = 10.00"
    assert quality.long_run_checks("dcgan", timeline[:2]) == []  # a budget under 60 minutes
    assert quality.long_run_checks("dcgan", timeline[1:]) == []  # no 10-minute mark


def test_the_wgan_family_is_held_to_a_multiple_of_dcgan_fid_at_the_same_mark():
    def timeline(*marks):
        return {"timeline": [{"minutes": m, "fid": fid, "recall": recall}
                             for m, fid, recall in marks]}

    results = {"dcgan": timeline((10, 16.0, 0.74), (60, 12.0, 0.77)),
               "wgan_gp": timeline((10, 31.0, 0.66), (60, 15.5, 0.62)),
               "sngan": timeline((10, 33.0, 0.65), (60, 14.0, 0.59)),
               "wgan": timeline((10, 90.0, 0.3), (60, 25.0, 0.61)),
               "strong": timeline((10, 30.0, 0.5), (60, 28.0, 0.5))}
    checks = dict(quality.fid_ratio_checks(results))
    assert checks == {
        "wgan_gp FID 31.00 at 10 min <= 2 x dcgan FID 16.00 = 32.00": True,
        "wgan_gp FID 15.50 at 60 min <= 1.25 x dcgan FID 12.00 = 15.00": False,
        "sngan FID 33.00 at 10 min <= 2 x dcgan FID 16.00 = 32.00": False,
        "sngan FID 14.00 at 60 min <= 1.25 x dcgan FID 12.00 = 15.00": True,
        "wgan FID 25.00 at 60 min <= 2 x dcgan FID 12.00 = 24.00": False}  # wgan: no 10-min target
    recall = dict(quality.long_run_recall_checks(results))  # the baselines are not held to it
    assert recall == {"dcgan recall 0.770 at 60 min >= 0.6": True,
                      "wgan_gp recall 0.620 at 60 min >= 0.6": True,
                      "sngan recall 0.590 at 60 min >= 0.6": False,
                      "wgan recall 0.610 at 60 min >= 0.6": True}
    ten_minutes = {label: {"timeline": result["timeline"][:1]} for label, result in results.items()}
    assert quality.long_run_recall_checks(ten_minutes) == []
    assert len(quality.fid_ratio_checks(ten_minutes)) == 2  # wgan_gp and sngan at 10 minutes
    del results["dcgan"]
    assert quality.fid_ratio_checks(results) == []


def exiting_run_py(tmp_path, exit_code, before=""):
    """A stand-in for `quality.run_py`: writes the row's config.json, runs the Python statements
    `before` and exits `exit_code`."""
    def run_py(*flags, **popen):
        (tmp_path / "config.json").write_text('{"batch_size": 64, "d_updates": 1}')
        return quality.subprocess.Popen(
            [quality.sys.executable, "-c", f"{before}exit({exit_code})"], **popen)

    return run_py


DECAY_ROW = quality.Row("decay", ("--setup=dcgan", "--g_lr_schedule=linear", "--train_cycles=500"))


@pytest.mark.parametrize("exit_code", [0, 42])
def test_a_row_may_finish_its_own_train_steps_before_the_deadline(exit_code, tmp_path,
                                                                  monkeypatch):
    """A finished run (0) and a preempted one (42) are both results."""
    monkeypatch.setattr(quality, "run_py", exiting_run_py(tmp_path, exit_code))
    monkeypatch.setattr(quality, "_last_step", lambda directory: 500)
    result = quality.train_row(DECAY_ROW, str(tmp_path), budget=60, seed=0)
    assert (result["steps"], result["batch_size"], result["keeps_ema"]) == (500, 64, False)
    assert result["flags"] == list(DECAY_ROW.flags)


def test_a_row_that_had_finished_when_the_deadline_came_is_a_result(tmp_path, monkeypatch):
    """A --train_time row whose run printed its last line but was still exiting at the deadline
    is killed by the SIGTERM (exit -15): its final checkpoint is its result."""
    monkeypatch.setattr(quality, "run_py", exiting_run_py(
        tmp_path, 0, before=f"print({quality.FINISHED_LINE!r} + ' 500', flush=True); "
                            "import time; time.sleep(60); "))
    monkeypatch.setattr(quality, "_last_step", lambda directory: 500)
    result = quality.train_row(DECAY_ROW, str(tmp_path), budget=2, seed=0)
    assert result["steps"] == 500


def test_a_row_killed_at_the_deadline_before_finishing_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(quality, "run_py", exiting_run_py(
        tmp_path, 0, before="print('step 50', flush=True); import time; time.sleep(60); "))
    with pytest.raises(SystemExit, match=r"neither finished .* \(exit -15\):\nstep 50"):
        quality.train_row(DECAY_ROW, str(tmp_path), budget=2, seed=0)


def test_a_row_that_fails_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(quality, "run_py", exiting_run_py(tmp_path, 3))
    with pytest.raises(SystemExit, match="neither finished nor stopped at the deadline"):
        quality.train_row(DECAY_ROW, str(tmp_path), budget=60, seed=0)


def results_file(path, rows, minutes=60.0, seed=None):
    """A --json file of quality.py with these rows (label: (60-min FID, recall)), of `seed`
    (None: a file written before rows recorded their seed)."""
    timeline = lambda fid, recall: [{"minutes": 10.0, "fid": fid * 2, "precision": 0.6,
                                     "recall": recall - 0.1},
                                    {"minutes": minutes, "fid": fid, "precision": 0.66,
                                     "recall": recall}]
    path.write_text(json.dumps({
        "minutes": minutes, "eval_minutes": 10.0, "marks": [10.0, minutes], "eval_samples": 10000,
        "rows": {label: {"steps": 1000, "images_per_second": 300.0, "fid": fid, "precision": 0.66,
                         "recall": recall, "timeline": timeline(fid, recall),
                         **({} if seed is None else {"seed": seed})}
                 for label, (fid, recall) in rows.items()}}))
    return str(path)


def test_merge_reports_rows_of_separate_invocations_as_one_run(tmp_path, monkeypatch, capsys):
    """sngan is held to dcgan's FID only when both rows are in one report: --merge puts them
    there, checks them, draws them and writes them, training nothing."""
    dcgan = results_file(tmp_path / "dcgan.json", {"dcgan": (12.0, 0.77)})
    sngan = results_file(tmp_path / "sngan.json", {"sngan": (16.0, 0.72), "lsgan": (20.0, 0.7)})
    merged, plot = tmp_path / "merged.json", tmp_path / "merged.png"
    monkeypatch.setattr(quality, "ensure_evaluator", lambda: pytest.fail("trained"))
    monkeypatch.setattr("sys.argv", ["quality.py", "--merge", dcgan, sngan,
                                     "--json", str(merged), "--plot", str(plot)])
    with pytest.raises(SystemExit) as exit_status:
        quality.main()
    assert exit_status.value.code == 1  # sngan 16.0 > 1.25 x 12.0
    written = json.loads(merged.read_text())
    assert list(written["rows"]) == ["dcgan", "sngan", "lsgan"]
    assert (written["minutes"], written["marks"]) == (60.0, [10.0, 60.0])
    assert written["targets"]["sngan FID 16.00 at 60 min <= 1.25 x dcgan FID 12.00 = 15.00"] is False
    assert written["targets"]["sngan FID 32.00 at 10 min <= 2 x dcgan FID 24.00 = 48.00"] is True
    assert written["targets"]["lsgan recall 0.700 at 60 min >= 0.6"] is True
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert "FAIL  sngan FID 16.00 at 60 min" in capsys.readouterr().out


@pytest.mark.parametrize("second, minutes, message", [
    ({"dcgan": (13.0, 0.7)}, 60.0, "the row 'dcgan' is in"),  # neither file names its seed
    ({"sngan": (13.0, 0.7)}, 30.0, "differ from those of"),
    (None, None, "not a results file of quality.py --json"),  # no such file
])
def test_merge_refuses_files_that_are_not_one_run(second, minutes, message, tmp_path, monkeypatch,
                                                  capsys):
    first = results_file(tmp_path / "a.json", {"dcgan": (12.0, 0.77)})
    other = (str(tmp_path / "missing.json") if second is None
             else results_file(tmp_path / "b.json", second, minutes=minutes))
    monkeypatch.setattr("sys.argv", ["quality.py", "--merge", first, other])
    with pytest.raises(SystemExit):
        quality.parse_args()
    error = capsys.readouterr().err
    assert message in error and ("--merge" in error)


def test_merge_reports_seeds_of_one_row_as_their_mean_and_checks_the_mean(tmp_path, monkeypatch,
                                                                         capsys):
    """Three seeds of dcgan and of strong, one pair of files per seed: each seed is its own row,
    and the label is their mean, final and at each mark, which the targets are held to."""
    paths = [results_file(tmp_path / f"{label}-{seed}.json", {label: (fid, recall)}, seed=seed)
             for seed, (dcgan, strong) in enumerate([(9.0, 40.0), (12.0, 36.0), (15.0, 44.0)])
             for label, fid, recall in (("dcgan", dcgan, 0.8), ("strong", strong, 0.5))]
    merged, plot = tmp_path / "merged.json", tmp_path / "merged.png"
    monkeypatch.setattr("sys.argv", ["quality.py", "--merge", *paths, "--json", str(merged),
                                     "--plot", str(plot)])
    quality.main()  # every target passes: no exit status 1
    written = json.loads(merged.read_text())
    rows = written["rows"]
    assert list(rows) == ["dcgan", "dcgan (seed 0)", "dcgan (seed 1)", "dcgan (seed 2)",
                          "strong", "strong (seed 0)", "strong (seed 1)", "strong (seed 2)"]
    assert rows["dcgan"]["fid"] == pytest.approx(12.0) and rows["strong"]["fid"] == pytest.approx(40.0)
    assert rows["dcgan"]["seeds"] == [0, 1, 2]
    assert [entry["fid"] for entry in rows["dcgan"]["timeline"]] == pytest.approx([24.0, 12.0])
    assert rows["dcgan (seed 2)"]["fid"] == 15.0
    assert rows["dcgan (seed 2)"]["averaged_into"] == "dcgan"
    assert written["targets"] == {
        # a 10-minute target, checked at the 10-minute mark of a longer run
        "dcgan FID 24.00 at 10 min <= strong FID 80.00 / 3 = 26.67": True,
        "dcgan precision 0.660 >= 0.65": True,
        "dcgan recall 0.800 >= 0.75": True,
        "dcgan FID 12.00 at 60 min <= its 10-min FID / 2 = 12.00": True,
        "dcgan FID 12.00 at 60 min <= 1.15 x 24.00 at 10 min": True,
        "best Gantry row dcgan FID 24.00 at 10 min <= 0.6 x strong FID 80.00 = 48.00": True,
        "best Gantry row dcgan FID 12.00 at 60 min <= 0.5 x strong FID 40.00 = 20.00": True,
        "dcgan recall 0.800 at 60 min >= 0.6": True}  # no single seed is held to a target
    drawn = quality_report.plot_timeline(rows, str(plot), title="seeds")
    assert drawn["FID"] == list(rows)
    assert "dcgan (seed 1)" in capsys.readouterr().out


def test_dcgan_is_held_to_the_baselines_at_ten_minutes_whatever_the_budget():
    """The reference and strong targets were set for a 10-minute run: a longer run checks them
    at its 10-minute mark (at 60 minutes dcgan 3.0 > 20.0 / 10 would fail), a shorter one not."""
    row = lambda short, last: {"fid": last, "precision": 0.7, "recall": 0.8, "timeline": [
        {"minutes": 10.0, "fid": short, "recall": 0.8}, {"minutes": 60.0, "fid": last,
                                                         "recall": 0.8}]}
    results = {"dcgan": row(5.0, 3.0), "reference": row(60.0, 20.0), "strong": row(18.0, 9.0)}
    against_baselines = lambda checks: [check for check in checks
                                        if re.search("<= (reference|strong) FID", check[0])]
    assert against_baselines(quality.check_targets(results, "fashion_mnist")) == [
        ("dcgan FID 5.00 at 10 min <= reference FID 60.00 / 10 = 6.00", True),
        ("dcgan FID 5.00 at 10 min <= strong FID 18.00 / 3 = 6.00", True)]
    three_minutes = {label: {**result, "timeline": [{"minutes": 3.0, "fid": result["fid"]}]}
                     for label, result in results.items()}
    assert against_baselines(quality.check_targets(three_minutes, "fashion_mnist")) == []


def test_merge_refuses_one_seed_of_a_row_twice(tmp_path, monkeypatch, capsys):
    paths = [results_file(tmp_path / f"{name}.json", {"dcgan": (12.0, 0.77)}, seed=3)
             for name in "ab"]
    monkeypatch.setattr("sys.argv", ["quality.py", "--merge", *paths])
    with pytest.raises(SystemExit):
        quality.parse_args()
    assert "with the seeds [3, 3]; rows of one label must be distinct seeds" in capsys.readouterr().err


def test_a_row_that_keeps_its_own_ema_is_scored_raw_and_averaged(tmp_path, monkeypatch):
    """The r3gan preset keeps an EMA generator without --ema_halflife_kimg: both are scored."""
    def train_row(row, directory, budget, seed, checkpoint_every=0, dataset="fashion_mnist"):
        return {"steps": 10, "images_per_second": 1.0, "started": 0.0,
                "keeps_ema": row.label == "r3gan"}

    scored = []
    monkeypatch.setattr(quality, "ensure_evaluator", lambda: None)
    monkeypatch.setattr(quality, "train_row", train_row)
    monkeypatch.setattr(quality, "evaluate_row", lambda row, directory, samples, *, use_ema:
                        scored.append((row.label, use_ema)) or {"fid": 20.0 - use_ema})
    monkeypatch.setattr(quality, "gantry_timeline", lambda *args, **kwargs: [])
    monkeypatch.setattr("sys.argv", ["quality.py", "--no_reference", "--presets", "r3gan,dcgan",
                                     "--workdir", str(tmp_path), "--seed", "2"])
    results = quality.train_and_score(quality.parse_args())
    assert scored == [("r3gan", False), ("r3gan", True), ("dcgan", False)]
    assert {label: (result["fid"], result["seed"]) for label, result in results.items()} == {
        "r3gan": (20.0, 2), "r3gan + EMA": (19.0, 2), "dcgan": (20.0, 2)}


def test_stacked_rows_train_stacked_data_and_are_held_to_the_mode_targets(tmp_path, monkeypatch,
                                                                         capsys):
    monkeypatch.setattr("sys.argv", ["quality.py", "--dataset=stacked_fashion_mnist"])
    with pytest.raises(SystemExit):
        quality.parse_args()  # the baselines cannot train it
    assert "train Fashion-MNIST only; give --no_reference" in capsys.readouterr().err
    launched = []

    def run_py(*flags, **popen):
        launched.append(flags)
        return exiting_run_py(tmp_path, 0)(*flags, **popen)

    monkeypatch.setattr(quality, "run_py", run_py)
    monkeypatch.setattr(quality, "_last_step", lambda directory: 500)
    quality.train_row(DECAY_ROW, str(tmp_path), budget=60, seed=0, dataset="stacked_fashion_mnist")
    assert "--dataset=stacked_fashion_mnist" in launched[0]
    timeline = lambda modes, kl: {"timeline": [{"minutes": 60, "fid": 9.0, "precision": 0.7,
                                                "recall": 0.5, "modes": modes, "modes_kl": kl}],
                                  "fid": 9.0, "precision": 0.7, "recall": 0.5, "modes": modes}
    results = {"r3gan": timeline(991.0, 0.12), "dcgan": timeline(950.0, 0.3)}
    assert quality.mode_checks(results) == [("r3gan modes 991 at 60 min >= 990", True),
                                            ("r3gan mode KL 0.120 at 60 min <= 0.1", False)]
    assert quality.mode_checks({"r3gan": {"timeline": [{"minutes": 10, "modes": 991.0}]}}) == []
    # each dataset holds its rows to its own targets: dcgan's Fashion-MNIST recall and the
    # modes are never checked on the other's rows
    assert quality.check_targets(results, "stacked_fashion_mnist") == quality.mode_checks(results)
    fashion = dict(quality.check_targets(results, "fashion_mnist"))
    assert fashion["dcgan recall 0.500 >= 0.75"] is False
    assert not any("mode" in description for description in fashion)
    table = quality_report.format_table({"r3gan": {"steps": 5, "images_per_second": 1.0,
                                                   "modes": 991.0, "modes_kl": 0.1234}})
    assert table.splitlines() == ["  row  steps  img/s  modes  modes_kl",  # no empty column
                                  "r3gan      5      1    991     0.123"]


@pytest.mark.parametrize("flags, message", [
    (["--seeds", "0,1"], "give --cores too"),
    (["--cores", "1000"], "--cores must be 0 (rows one after another) or 1 to the"),
    (["--cores", "1", "--seeds", "0,x"], "--seeds=0,x: give whole numbers"),
])
def test_side_by_side_settings_are_checked(flags, message, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["quality.py", *flags])
    with pytest.raises(SystemExit):
        quality.parse_args()
    assert message in capsys.readouterr().err


def test_side_by_side_runs_rows_in_waves_of_cores_and_reports_their_seeds_as_means(
        tmp_path, monkeypatch):
    """Two rows, two seeds, one core (a wave per process): each process gets its row and seed
    alone and is waited for before the next starts; their files merge into means and seeds."""
    events = []

    class FakeProcess:
        def __init__(self, command, **popen):
            self.flags = dict(flag.split("=", 1) for flag in command[2:] if "=" in flag)
            self.label = command[command.index("--row") + 1].split(":")[0]
            assert "--no_reference" in command and callable(popen["preexec_fn"])
            events.append(("start", self.label, self.flags["--seed"]))

        def wait(self):
            events.append(("end", self.label, self.flags["--seed"]))
            fid = {"strong": 30.0, "dcgan": 10.0}[self.label] + int(self.flags["--seed"])
            record = json.loads(open(results_file(
                tmp_path / "one.json", {self.label: (fid, 0.7)}, minutes=10.0,
                seed=int(self.flags["--seed"]))).read())
            record["marks"] = [2.0, 4.0, 6.0, 8.0, 10.0]  # these settings: --eval_minutes 2
            record["eval_minutes"], record["dataset"] = 2.0, "fashion_mnist"
            with open(self.flags["--json"], "w") as file:
                json.dump(record, file)

    monkeypatch.setattr(quality, "ensure_evaluator", lambda: None)
    monkeypatch.setattr(quality.subprocess, "Popen", FakeProcess)
    monkeypatch.setattr("sys.argv", ["quality.py", "--cores", "1", "--seeds", "0,1",
                                     "--no_reference", "--row", "strong", "--presets", "dcgan",
                                     "--workdir", str(tmp_path / "work")])
    results = quality.train_side_by_side(quality.parse_args())
    assert events == [("start", "strong", "0"), ("end", "strong", "0"),
                      ("start", "dcgan", "0"), ("end", "dcgan", "0"),
                      ("start", "strong", "1"), ("end", "strong", "1"),
                      ("start", "dcgan", "1"), ("end", "dcgan", "1")]
    assert list(results) == ["strong", "strong (seed 0)", "strong (seed 1)",
                             "dcgan", "dcgan (seed 0)", "dcgan (seed 1)"]
    assert (results["strong"]["fid"], results["dcgan"]["fid"]) == (30.5, 10.5)
    assert sorted(os.listdir(tmp_path / "work")) == [
        f"{label}-seed{seed}.{ext}" for label in ("dcgan", "strong") for seed in (0, 1)
        for ext in ("json", "log")]


def test_side_by_side_stops_when_a_row_writes_no_results(tmp_path, monkeypatch):
    class FailedProcess:
        def __init__(self, command, **popen):
            pass

        def wait(self):
            return 2

    monkeypatch.setattr(quality, "ensure_evaluator", lambda: None)
    monkeypatch.setattr(quality.subprocess, "Popen", FailedProcess)
    monkeypatch.setattr("sys.argv", ["quality.py", "--cores", "1", "--no_reference",
                                     "--presets", "dcgan", "--workdir", str(tmp_path)])
    with pytest.raises(SystemExit, match=r"dcgan-seed0.json wrote no results; its output is "
                                         r".*dcgan-seed0.log"):
        quality.train_side_by_side(quality.parse_args())


def test_an_interrupted_side_by_side_run_stops_every_row_of_its_wave(tmp_path, monkeypatch):
    terminated = []

    class InterruptedProcess:
        def __init__(self, command, **popen):
            self.label = command[command.index("--row") + 1]

        def wait(self):
            raise KeyboardInterrupt

        def terminate(self):
            terminated.append(self.label)

    monkeypatch.setattr(quality, "ensure_evaluator", lambda: None)
    monkeypatch.setattr(quality.subprocess, "Popen", InterruptedProcess)
    monkeypatch.setattr(quality.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr("sys.argv", ["quality.py", "--cores", "2", "--row", "strong",
                                     "--no_reference", "--presets", "dcgan",
                                     "--workdir", str(tmp_path)])
    with pytest.raises(KeyboardInterrupt):
        quality.train_side_by_side(quality.parse_args())
    assert terminated == ["strong", "dcgan: --setup=dcgan"]


def test_a_side_by_side_row_is_given_its_runs_settings(tmp_path, monkeypatch):
    """The process of one row parses to the settings of the run that launched it."""
    launched = []
    monkeypatch.setattr(quality.subprocess, "Popen",
                        lambda command, **popen: launched.append(command))
    monkeypatch.setattr("sys.argv", [
        "quality.py", "--cores", "1", "--minutes", "60", "--eval_minutes", "20",
        "--checkpoint_every", "2000", "--eval_samples", "500", "--dataset",
        "stacked_fashion_mnist", "--no_reference", "--workdir", str(tmp_path),
        "--row", "r3gan: --setup=r3gan --train_time=3510s"])
    run = quality.parse_args()
    quality.launch_pinned(run.rows[0], 7, core=0, args=run)
    monkeypatch.setattr("sys.argv", launched[0][1:])
    row = quality.parse_args()
    for key in quality.SIDE_BY_SIDE_SETTINGS + ("marks", "rows"):
        assert getattr(row, key) == getattr(run, key), key
    assert (row.seeds, row.cores, row.json) == ([7], 0, str(tmp_path / "r3gan-seed7.json"))


def test_a_side_by_side_row_runs_pinned_to_its_core():
    import subprocess
    import sys
    core = sorted(os.sched_getaffinity(0))[-1]
    shown = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                           preexec_fn=quality.pinned_to(core), capture_output=True, text=True)
    assert shown.stdout.strip() == f"[{core}]"


def test_merge_refuses_rows_to_train(tmp_path, monkeypatch, capsys):
    first = results_file(tmp_path / "a.json", {"dcgan": (12.0, 0.77)})
    monkeypatch.setattr("sys.argv", ["quality.py", "--merge", first, "--presets", "sngan"])
    with pytest.raises(SystemExit):
        quality.parse_args()
    assert "give no --row or --presets with it" in capsys.readouterr().err


def test_the_tables_read_the_domain_metrics_under_their_plain_names():
    evaluated = {"fid_domain": 12.0, "kid_std_domain": 0.1, "fid_inception": 40.0,
                 "intra_fid_per_class_domain": [1.0], "step": 7, "features": {"name": "domain"}}
    assert quality.on_domain_features(evaluated) == {
        "fid": 12.0, "kid_std": 0.1, "intra_fid_per_class": [1.0], "step": 7,
        "features": {"name": "domain"}}
