"""`--gan=dfad`: trained in-process against the small teacher with the training split
unreadable (the student learns, the teacher stays), evaluated; its refused flags and mode (its
L1 loss: tests/gan/test_distillation.py)."""

import keras
import numpy as np
import pytest

from datasets import registry as datasets
from gan import distillation
from trainers import api
from trainers.config.fields import Config, ConfigError
from trainers.modes import restore, sample
from trainers.outputs import summaries
from trainers.setups import registry
from trainers.setups.distill import evaluation_examples

EVAL_SAMPLES = 100


def test_it_trains_the_student_without_reading_a_training_image(teacher, tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the training split was read")

    load_split = datasets.load_split
    monkeypatch.setattr(datasets, "training_examples", refuse)
    monkeypatch.setattr(datasets, "load_split", lambda *args, split, **kwargs: (
        load_split(*args, split=split, **kwargs) if split == "test" else refuse()))
    logdir = tmp_path / "run"
    api.train(api.config(
        gan="dfad", logdir=str(logdir), evaluator_dir=str(teacher / "evaluators"), student_width=4,
        g_width=8, latent_dim=16, batch_size=16, d_steps=3, train_steps=4, steps_per_loop=2,
        checkpoint_every=4, eval_every=4, eval_samples=EVAL_SAMPLES, image_every=4,
        histogram_every=0))

    restored = restore.restore(str(logdir), use_ema=False)
    models = restored.built.models
    assert restored.step == 4
    fresh = distillation.student_classifier(input_shape=(28, 28, 1), num_classes=10, width=4, seed=0)
    assert any(not np.array_equal(now, before) for now, before in
               zip(models["student"].get_weights(), fresh.get_weights()))
    saved = keras.models.load_model(teacher / "teacher.keras", compile=False)
    for now, before in zip(models["teacher"].get_weights(), saved.get_weights()):
        np.testing.assert_array_equal(now, before)
    tags = summaries.read_event_tags(str(logdir))
    assert {"student/discrepancy", "student/agreement", "generator/discrepancy",
            "eval/student_accuracy", "eval/teacher_accuracy", "eval/agreement"} <= tags["scalars"]
    assert "inputs" in tags["images"]
    metrics = api.evaluate(str(logdir), eval_samples=EVAL_SAMPLES)
    assert metrics["num_samples"] == EVAL_SAMPLES and 0 <= metrics["student_accuracy"] <= 1
    images, labels = evaluation_examples(Config(eval_samples=EVAL_SAMPLES), restored.run)
    assert metrics["teacher_accuracy"] == pytest.approx(float(np.mean(
        distillation.correct(labels, saved(images, training=False)).numpy())))
    with pytest.raises(ConfigError, match=r"--gan=dfad run, whose generator only makes the "
                                          r"student's training inputs"):
        sample.sample(Config(mode="sample", logdir=str(logdir), output=str(tmp_path / "s.png")))


@pytest.mark.parametrize("flags, message", [
    (dict(penalty="r1"), r"--penalty='r1' is invalid: --gan=dfad does not use it"),
    (dict(d_width=16), r"--d_width=16 is invalid: --gan=dfad does not use it \(the student's "
                       r"network is --student_width's CNN\)"),
    (dict(g_steps=2), r"--g_steps=2 is invalid: --gan=dfad does not use it \(the generator makes "
                      r"one update per cycle; the student's are --d_steps\)"),
    (dict(temperature=2.0), r"--temperature=2.0 is invalid: only --gan=distill reads it"),
    (dict(student_width=0), r"--student_width=0 is invalid: use a positive width"),
])
def test_flags_it_does_not_use_are_refused(flags, message):
    with pytest.raises(ConfigError, match=message):
        registry.resolve(Config(gan="dfad", **flags))
