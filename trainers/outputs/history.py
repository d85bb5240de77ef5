"""The history of a training run as it trains, and the Keras callbacks that watch it.

`api.train` hands a `History` to the train mode, which runs `History.job` after every loop of
--cycles_per_loop cycles, after the jobs that write summaries, on the chief only. What a loop
logged is the scalars those jobs wrote to the event file (`LoopReport.logged`, float32 as
stored), by their TensorBoard tags: so `values` equals what
`summaries.read_scalars(logdir, tag)` reads back for the loops of this call.

Callbacks are `keras.callbacks.Callback` objects driven as `model.fit` drives them with one
loop for an epoch: `on_train_begin({})` before the first loop, `on_epoch_end(step, logs)` after
each loop with the step reached and that loop's scalars, `on_train_end(logs)` with the last
loop's. Their `model` is the run's sampling model (the EMA generator when the run keeps one).
A callback that sets `model.stop_training` (EarlyStopping, TerminateOnNaN) ends the run after
that loop, checkpointed (`stop_requested`), except under --strategy=multi_worker, where the
other workers would wait for the chief.
"""

from __future__ import annotations

from typing import Sequence

import keras

from trainers.engine.controller import LoopReport, PeriodicAction


class History:
    """Per-loop scalars of a run (`values`: tag -> [(step, value)]) and the callbacks given."""

    def __init__(self, callbacks: Sequence[keras.callbacks.Callback] = ()):
        callbacks = list(callbacks)
        wrong = [type(callback).__name__ for callback in callbacks
                 if not isinstance(callback, keras.callbacks.Callback)]
        if wrong:
            raise TypeError(f"callbacks: each must be a keras.callbacks.Callback; got "
                            f"{', '.join(wrong)}. Subclass keras.callbacks.Callback, or wrap a "
                            "function in keras.callbacks.LambdaCallback(on_epoch_end=...).")
        self.values: dict[str, list[tuple[int, float]]] = {}
        self._callbacks = keras.callbacks.CallbackList(callbacks)
        self._last: dict[str, float] = {}

    def begin(self, model: keras.Model | None) -> None:
        """Before the first loop: the callbacks' model, then their `on_train_begin`."""
        if model is not None:
            model.stop_training = False
        self._callbacks.set_model(model)
        self._callbacks.on_train_begin({})

    def record(self, report: LoopReport) -> None:
        """After a loop: its scalars join `values`, and go to the callbacks' `on_epoch_end`."""
        logs = dict(report.logged)
        for tag, value in logs.items():
            self.values.setdefault(tag, []).append((report.step, value))
        self._last = logs
        self._callbacks.on_epoch_end(report.step, dict(logs))

    def stop_requested(self) -> bool:
        """Whether a callback set its model's `stop_training` (as `model.fit` reads it)."""
        return bool(getattr(self._callbacks.model, "stop_training", False))

    def job(self) -> PeriodicAction:
        """`record` after every loop; the train mode runs it after the jobs that log."""
        return PeriodicAction(name="history", every=0, fn=self.record)

    def end(self) -> None:
        """After the last loop (also when the run had nothing left to train)."""
        self._callbacks.on_train_end(dict(self._last))
