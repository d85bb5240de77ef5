"""Test-session set-up shared by every test module.

The CPU is split into two logical devices before TensorFlow initialises, so mirrored
(multi-replica) training is tested on a CPU-only machine; one-replica strategies use the first.
Op determinism makes resume and replica-equivalence comparisons exact.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Tests never reach the network: no dataset download is attempted or probed.
os.environ["GANTRY_OFFLINE"] = "1"

import tensorflow as tf  # noqa: E402

import trainers.api  # noqa: E402,F401  declares every flag before any test makes a Config
from trainers.engine.distribution import configure_cpu_replicas  # noqa: E402

configure_cpu_replicas(2)
tf.config.experimental.enable_op_determinism()


def _starts_processes(module) -> bool:
    """Whether a test module starts processes (`run.py` through tests.cli, a browser through
    tests.trainers.browser, or subprocess)."""
    return "subprocess" in vars(module) or any(
        getattr(value, "__module__", None) in ("tests.cli", "tests.trainers.browser")
        for value in vars(module).values())


def pytest_collection_modifyitems(items):
    """Modules that start processes first, then the rest by number of tests, each module's tests
    in file order. `make test` hands whole modules to its workers in this order
    (`--dist=loadscope --no-loadscope-reorder`): the process-starting modules are the long ones,
    and xdist's own order (by number of tests) left a long module of a few tests (the flag fuzz,
    the two-worker job) for last, with the other worker idle."""
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    order = sorted(modules.values(),
                   key=lambda tests: (not _starts_processes(tests[0].module), -len(tests)))
    items[:] = [item for tests in order for item in tests]
