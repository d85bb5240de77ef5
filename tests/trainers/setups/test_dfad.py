"""`--setup=dfad`: trained in-process against the small teacher with the training split
unreadable (the student learns, the teacher stays), evaluated; its refused flags and mode (its
L1 loss: tests/gan/test_distillation.py)."""

import keras
import numpy as np
import pytest

from datasets import registry as datasets
from gan import distillation
from trainers import api
from trainers.config.flags import Config, ConfigError
from trainers.modes import restore, sample
from trainers.outputs import summaries
from trainers.setups import dfad, registry
from trainers.setups.dfad import DataFreeDistillation
from trainers.setups.protocol import LearningRate
from trainers.setups.students import evaluation_examples

EVAL_SAMPLES = 100
STATISTICS_WEIGHT, CLASS_BALANCE_WEIGHT = 0.5, 2.0


def test_it_trains_the_student_without_reading_a_training_image(teacher, tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the training split was read")

    load_split = datasets.load_split
    monkeypatch.setattr(datasets, "training_examples", refuse)
    monkeypatch.setattr(datasets, "load_split", lambda *args, split, **kwargs: (
        load_split(*args, split=split, **kwargs) if split == "test" else refuse()))
    logdir = tmp_path / "run"
    api.train(api.config(
        setup="dfad", logdir=str(logdir), evaluator_dir=str(teacher / "evaluators"), student_width=4,
        g_width=8, latent_dim=16, batch_size=16, student_updates=3, train_cycles=4, cycles_per_loop=2,
        checkpoint_every=4, eval_every=4, eval_samples=EVAL_SAMPLES, image_every=4,
        histogram_every=0, statistics_weight=STATISTICS_WEIGHT,
        class_balance_weight=CLASS_BALANCE_WEIGHT))

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
    # The generator's loss is minus the discrepancy plus its two weighted priors.
    terms = {name: dict(summaries.read_scalars(str(logdir), f"generator/{name}"))
             for name in ("loss", "discrepancy", "statistics", "class_balance")}
    assert sorted(terms["loss"]) == [2, 4]
    for step, loss in terms["loss"].items():
        assert terms["statistics"][step] > 0 and terms["class_balance"][step] >= 0
        assert loss == pytest.approx(-terms["discrepancy"][step]
                                     + STATISTICS_WEIGHT * terms["statistics"][step]
                                     + CLASS_BALANCE_WEIGHT * terms["class_balance"][step], rel=1e-4)
    metrics = api.evaluate(str(logdir), eval_samples=EVAL_SAMPLES)
    assert metrics["num_samples"] == EVAL_SAMPLES and 0 <= metrics["student_accuracy"] <= 1
    images, labels = evaluation_examples(Config(eval_samples=EVAL_SAMPLES), restored.run)
    assert metrics["teacher_accuracy"] == pytest.approx(float(np.mean(
        distillation.correct(labels, saved(images, training=False)).numpy())))
    with pytest.raises(ConfigError, match=r"--setup=dfad run, whose generator only makes the "
                                          r"student's training inputs"):
        sample.sample(Config(mode="sample", logdir=str(logdir), output=str(tmp_path / "s.png")))


@pytest.mark.parametrize("flags, message", [
    (dict(penalty="r1"), r"--penalty='r1' is invalid: only --setup=dcgan\|.*\|acgan reads it and "
                         r"this run is --setup=dfad"),
    (dict(d_width=16), r"--d_width=16 is invalid: only --setup=dcgan\|.*\|cyclegan reads it and "
                       r"this run is --setup=dfad"),
    (dict(loss="hinge"), r"--loss='hinge' is invalid: only --setup=dcgan\|.*\|cyclegan reads it"),
    (dict(temperature=2.0), r"--temperature=2.0 is invalid: only --setup=distill reads it"),
    (dict(student_width=0), r"--student_width=0 is invalid: use a positive width"),
    (dict(statistics_weight=-1.0), r"--statistics_weight=-1.0 is invalid: use a weight >= 0"),
    (dict(class_balance_weight=float("nan")), r"--class_balance_weight=nan is invalid"),
])
def test_flags_it_does_not_use_are_refused(flags, message):
    with pytest.raises(ConfigError, match=message):
        registry.resolve(Config(setup="dfad", **flags))


def test_the_statistics_prior_is_only_dfad_s():
    with pytest.raises(ConfigError, match=r"--statistics_weight=2.0 is invalid: only --setup=dfad "
                                          r"reads it"):
        registry.resolve(Config(setup="distill", statistics_weight=2.0))


def test_a_teacher_without_batch_norm_cannot_give_the_statistics_prior(tmp_path):
    images = keras.Input(shape=(28, 28, 1))
    plain = keras.Model(images, keras.layers.Dense(10)(keras.layers.Flatten()(images)), name="plain")
    plain.save(tmp_path / "plain.keras")
    with pytest.raises(ConfigError, match=r"--statistics_weight=1.0 is invalid: the teacher \(.*"
                                          r"plain.keras\): 'plain' has no BatchNormalization layer"):
        api.train(api.config(setup="dfad", logdir=str(tmp_path / "run"), teacher=str(tmp_path / "plain.keras"),
                             statistics_weight=1.0, train_cycles=1))


@pytest.mark.parametrize("weights", [(0.0, 0.0), (0.5, 2.0)])
def test_the_generator_loss_is_minus_the_discrepancy_plus_the_priors_that_are_on(teacher, weights):
    import tensorflow as tf

    from gan import networks
    from trainers.engine.phases import StepInputs
    from trainers.setups import dfad
    statistics_weight, class_balance_weight = weights
    config = registry.resolve(Config(setup="dfad", latent_dim=8, statistics_weight=statistics_weight,
                                     class_balance_weight=class_balance_weight))
    teacher_model = keras.models.load_model(teacher / "teacher.keras", compile=False)
    models = {"teacher": teacher_model,
              "student": distillation.student_classifier(input_shape=(28, 28, 1), num_classes=10,
                                                         width=2),
              "generator": networks.dcgan_generator(resolution=28, channels=1, latent_dim=8,
                                                    width=4)}
    _, generator = dfad.discrepancy_phases(config, dfad.teacher_statistics(config, teacher_model))
    inputs = StepInputs(real=None, seed=tf.constant([3, 4], tf.int64), global_batch_size=8,
                        replica_batch_size=8, replica_index=tf.constant(0))
    output = generator.loss(models, inputs)
    assert set(output.metrics) == set(dfad.generator_metrics(config)) == (
        {"discrepancy"} if weights == (0.0, 0.0) else {"discrepancy", "statistics", "class_balance"})
    images = models["generator"](inputs.normal((8,)), training=True)
    logits = teacher_model(images, training=False)
    discrepancy = np.mean(distillation.logit_discrepancy(
        logits, models["student"](images, training=True)).numpy())
    assert output.metrics["discrepancy"].numpy() == pytest.approx(discrepancy, rel=1e-5)
    expected = -discrepancy
    if statistics_weight:
        *features, _ = distillation.batch_statistics_model(teacher_model)(images, training=False)
        expected += statistics_weight * distillation.batch_statistics_gap(
            features, distillation.batch_norm_layers(teacher_model)).numpy()
        expected += class_balance_weight * distillation.class_balance_gap(logits).numpy()
    assert output.loss.numpy() == pytest.approx(expected, rel=1e-4)


def test_no_batch_size_is_too_large_for_the_training_set_it_never_reads():
    config = registry.resolve(Config(setup="dfad", batch_size=100_000))
    assert registry.get("dfad").training_sets(config, datasets.dataset_info("fashion_mnist")) == {}
    distill = registry.resolve(Config(setup="distill", batch_size=100_000))
    assert registry.get("distill").training_sets(
        distill, datasets.dataset_info("fashion_mnist")) == {"--dataset=fashion_mnist": 60_000}


def test_the_student_takes_the_discriminators_old_flags_with_one_notice_each(capsys):
    old = api.config(setup="dfad", d_lr=3e-3, d_updates=2, d_lr_schedule="cosine",
                     d_clip_global_norm=1.0)
    notices = capsys.readouterr().err.splitlines()
    assert old == api.config(setup="dfad", student_lr=3e-3, student_updates=2,
                             student_lr_schedule="cosine", student_clip_global_norm=1.0)
    assert notices == [f"notice: --{flag} is now --{new} for --setup=dfad; --{flag} still works."
                       for flag, new in (("d_lr", "student_lr"), ("d_lr_schedule", "student_lr_schedule"),
                                         ("d_clip_global_norm", "student_clip_global_norm"),
                                         ("d_updates", "student_updates"))]
    assert (old.d_lr, old.d_updates, old.g_lr) == (None, None, 1e-3)  # the generator keeps --g_lr
    phases = dfad.discrepancy_phases(old)
    assert [(phase.name, phase.repeats, phase.clip_norm) for phase in phases] == [
        ("student", 2, 1.0), ("generator", 1, 0.0)]
    assert DataFreeDistillation().learning_rates(old) == {
        "student": LearningRate(3e-3, "cosine"), "generator": LearningRate(1e-3, "constant")}
