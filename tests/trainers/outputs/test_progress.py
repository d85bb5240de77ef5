import io

from trainers.engine.controller import LoopReport
from trainers.outputs.progress import Progress, format_seconds
from trainers.engine.trainer import LoopOutput


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Terminal(io.StringIO):
    def isatty(self):
        return True


def report(step, total=200):
    metrics = {"discriminator/loss": 1.25, "generator/loss": 0.5, "discriminator/grad_norm": 3.0}
    return LoopReport(step=step, output=LoopOutput(metrics=metrics, gradients={}),
                      images_per_second=640.0, seconds=0.1, final=step == total)


def drive(stream, seconds_per_loop, loops=20, total=200):
    clock = Clock()
    progress = Progress(total_steps=total, stream=stream, clock=clock)
    for index in range(1, loops + 1):
        clock.now += seconds_per_loop
        progress(report(index * total // loops, total))
    return stream.getvalue().splitlines()


def test_log_output_is_quiet_when_not_a_terminal():
    lines = drive(io.StringIO(), seconds_per_loop=5.0)
    # first loop, then every 30 s (6 loops), and the last one
    assert [line.split()[1] for line in lines] == ["10/200", "70/200", "130/200", "190/200", "200/200"]


def test_terminal_output_updates_every_two_seconds():
    lines = drive(Terminal(), seconds_per_loop=1.0)
    assert len(lines) == 11  # loops 1, 3, 5, ..., 19 and the last


def test_line_shows_step_losses_speed_and_time_left():
    lines = drive(io.StringIO(), seconds_per_loop=5.0)
    assert lines[1] == "step 70/200 d_loss=1.2500 g_loss=0.5000 640 img/s left 1:05"
    assert lines[-1].endswith("left 0:00")
    assert lines[0].endswith("left ?")


def test_without_a_cycle_limit_the_line_shows_the_step_and_the_time_budget_left():
    clock, left = Clock(), [3725.0]
    progress = Progress(total_steps=None, stream=io.StringIO(), clock=clock,
                        time_left=lambda: left[0])
    assert progress.line(report(70)) == "step 70 d_loss=1.2500 g_loss=0.5000 640 img/s left 1:02:05"


def test_the_time_left_is_the_sooner_of_the_cycles_and_the_time_budget():
    clock, left = Clock(), [50.0]
    progress = Progress(total_steps=200, stream=io.StringIO(), clock=clock,
                        time_left=lambda: left[0])
    for step in (10, 20):  # 1 s per 10 cycles: 180 cycles, 18 s, left to the last cycle
        clock.now += 1.0
        progress(report(step))
    assert progress.line(report(20)).endswith("left 0:18")
    left[0] = 7.0
    assert progress.line(report(20)).endswith("left 0:07")


def test_format_seconds():
    assert [format_seconds(s) for s in (0, 59.6, 61, 3600, 3725)] == ["0:00", "1:00", "1:01", "1:00:00", "1:02:05"]


def test_simultaneous_update_shows_each_models_loss_not_their_sum():
    metrics = {"simultaneous/loss": 1.75, "simultaneous/loss_discriminator": 1.25,
               "simultaneous/loss_generator": 0.5, "simultaneous/loss_scale_generator": 1024.0,
               "penalty/loss": 0.125}
    line = Progress(total_steps=10, stream=io.StringIO()).line(
        LoopReport(step=1, output=LoopOutput(metrics=metrics, gradients={}),
                   images_per_second=64.0, seconds=1.0))
    assert line.startswith("step 1/10 p_loss=0.1250 d_loss=1.2500 g_loss=0.5000 64 img/s")


def test_a_run_that_reads_no_data_shows_cycles_per_second():
    clock = Clock()
    progress = Progress(total_steps=None, stream=io.StringIO(), clock=clock)
    metrics = {"student/loss": 0.75, "generator/loss": -0.5}
    lines = []
    for step in (100, 200):  # two loops of 100 cycles in 40 s each
        clock.now += 40.0
        loop = LoopReport(step=step, output=LoopOutput(metrics=metrics, gradients={}),
                          images_per_second=0.0, seconds=40.0)
        progress(loop)
        lines.append(progress.line(loop))
    assert lines[0].startswith("step 100 g_loss=-0.5000 s_loss=0.7500 2.5 cycles/s left")
    assert lines[1].startswith("step 200 g_loss=-0.5000 s_loss=0.7500 2.5 cycles/s left")
