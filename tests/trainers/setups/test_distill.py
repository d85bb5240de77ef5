"""`--setup=distill`: a student distilled from a small Fashion-MNIST teacher, trained through
run.py (the teacher as the cached domain evaluator, the weights ramped), evaluated and exported
in-process; the weights changed by a Keras callback on the fit path; refused flags and data."""

import dataclasses
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from datasets import registry as datasets
from gan import evaluator
from tests.cli import run
from tests.image_folders import write_folder
from tests.trainers.setups.conftest import split
from trainers import api
from trainers.config.flags import Config, ConfigError
from trainers.config.record import RUN_RECORD_FILE
from trainers.fit.model import AdversarialModel
from trainers.modes import evaluate, export, restore, sample
from trainers.outputs import summaries
from trainers.setups import building, registry
from trainers.setups.distill import Distillation, student_phase
from trainers.setups.protocol import LearningRate
from trainers.setups.students import evaluation_examples

EVAL_SAMPLES = 200
# hard 1 -> 0.5 and soft 0 -> 0.5 over 4 cycles; the scalars are loop means of 2 cycles.
RAMP = ["--hard_weight_start=1", "--soft_weight_start=0", "--weight_ramp_cycles=4"]


@pytest.fixture(scope="module")
def trained(teacher, tmp_path_factory):
    logdir = tmp_path_factory.mktemp("distill") / "run"
    result = run("--setup=distill", f"--logdir={logdir}", f"--evaluator_dir={teacher / 'evaluators'}",
                 "--student_width=4", "--batch_size=32", "--train_cycles=6", "--cycles_per_loop=2",
                 "--checkpoint_every=2", "--eval_every=4", f"--eval_samples={EVAL_SAMPLES}",
                 "--image_every=0", "--histogram_every=0", "--shuffle_buffer=256",
                 "--precision=float32",  # on every CPU: the tests compare exported numbers
                 *RAMP)
    assert result.returncode == 0, result.stderr[-3000:]
    return logdir


def test_run_py_trains_the_student_with_ramped_weights(trained):
    assert not (trained / "samples.png").exists()  # a classifier draws nothing
    hard = summaries.read_scalars(str(trained), "student/hard_weight")
    soft = summaries.read_scalars(str(trained), "student/soft_weight")
    # Per cycle: hard 1, .875, .75, .625, .5, .5 and soft 0, .125, .25, .375, .5, .5.
    assert [step for step, _ in hard] == [2, 4, 6]
    np.testing.assert_allclose([value for _, value in hard], [0.9375, 0.6875, 0.5], rtol=1e-6)
    np.testing.assert_allclose([value for _, value in soft], [0.0625, 0.3125, 0.5], rtol=1e-6)
    tags = summaries.read_event_tags(str(trained))["scalars"]
    assert {"student/cross_entropy", "student/distillation", "student/accuracy",
            "student/agreement", "eval/student_accuracy", "eval/agreement"} <= tags
    best = json.loads((trained / "checkpoints_best" / "best.json").read_text())
    assert best["step"] == 4 and best["num_samples"] == EVAL_SAMPLES


def test_eval_reports_both_accuracies_and_their_agreement(trained):
    metrics = evaluate.evaluate(Config(mode="eval", logdir=str(trained), eval_samples=EVAL_SAMPLES))
    restored = restore.restore(str(trained), use_ema=False)
    assert metrics["step"] == 6 and "generator" not in metrics
    images, labels = evaluation_examples(Config(eval_samples=EVAL_SAMPLES), restored.run)
    student, teacher = (restored.built.models[name](images, training=False).numpy()
                        for name in ("student", "teacher"))
    assert metrics["student_accuracy"] == pytest.approx(np.mean(student.argmax(1) == labels))
    assert metrics["teacher_accuracy"] == pytest.approx(np.mean(teacher.argmax(1) == labels))
    assert metrics["agreement"] == pytest.approx(np.mean(student.argmax(1) == teacher.argmax(1)))
    assert 0 <= metrics["agreement"] <= 1 and metrics["num_samples"] == EVAL_SAMPLES


def test_the_teacher_is_frozen_and_checkpointed(trained, teacher):
    restored = restore.restore(str(trained), use_ema=False)
    original = keras.models.load_model(teacher / "teacher.keras", compile=False)
    for a, b in zip(original.weights, restored.built.models["teacher"].weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    assert not restored.built.models["teacher"].trainable_variables


def test_export_writes_the_student_as_saved_model_and_int8_tflite(trained):
    exported = export.export(Config(mode="export", logdir=str(trained), export_name="student",
                                    export_format="tflite", quantize="dynamic_int8"))
    assert exported.generator == "student" and exported.step == 6
    metadata = json.loads(open(f"{exported.path}/export.json").read())
    assert metadata["setup"] == "distill" and metadata["num_classes"] == 10
    restored = restore.restore(str(trained), use_ema=False)
    images, _ = evaluation_examples(Config(eval_samples=8), restored.run)
    expected = restored.built.models["student"](images, training=False).numpy()
    served = tf.saved_model.load(exported.path).signatures["serving_default"](
        images=tf.constant(images))
    np.testing.assert_allclose(served["logits"].numpy(), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(served["probabilities"].numpy().sum(1), 1.0, rtol=1e-5)
    interpreter = tf.lite.Interpreter(model_path=f"{exported.path}/model.tflite")
    runner = interpreter.get_signature_runner("serving_default")
    lite = runner(images=images)
    np.testing.assert_allclose(lite["probabilities"], served["probabilities"].numpy(), atol=0.05)


def test_sample_and_real_vs_real_are_refused(trained):
    with pytest.raises(ConfigError, match="a classifier, which draws nothing; use --mode=eval"):
        sample.sample(Config(mode="sample", logdir=str(trained)))
    with pytest.raises(ConfigError, match="--real_vs_real .* generates none"):
        evaluate.evaluate(Config(mode="eval", logdir=str(trained), real_vs_real=True))


def test_a_callback_changes_the_weights_on_the_fit_path_without_retracing(teacher, tmp_path):
    config = registry.resolve(Config(setup="distill", teacher=str(teacher / "teacher.keras"),
                                     student_width=4, batch_size=16, logdir=str(tmp_path)))
    info = datasets.dataset_info("fashion_mnist")
    built = building.build_run(Distillation(), config, info, tf.distribute.get_strategy())
    traces = []
    phase = built.phases[0]
    counted = dataclasses.replace(phase, loss=lambda models, inputs: (
        traces.append(1), phase.loss(models, inputs))[1])
    model = AdversarialModel(built.models, [counted], global_batch_size=16,
                             sample=built.models["student"])
    model.compile(built.optimizers, learning_rate_scales=built.learning_rate_scales)

    class HardOnly(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                built.loss_weights["hard"].assign(2.0)
                built.loss_weights["soft"].assign(0.0)

    history = model.fit(split("train", 64).repeat().batch(16), epochs=2,
                        steps_per_epoch=2, callbacks=[HardOnly()], verbose=0).history
    assert len(traces) == 1
    assert history["student/hard_weight"] == pytest.approx([0.5, 2.0])
    assert history["student/soft_weight"] == pytest.approx([0.5, 0.0])
    assert history["student/loss"][1] == pytest.approx(2 * history["student/cross_entropy"][1], rel=1e-5)


@pytest.mark.parametrize("flags, message", [
    (dict(temperature=0.0), r"--temperature=0.0 is invalid: use a temperature in \[0.01, 1000\]"),
    (dict(hard_weight=0.0, soft_weight=0.0), r"the student would learn nothing"),
    (dict(hard_weight_start=1.0), r"--hard_weight_start: the start of a ramp needs --weight_ramp_cycles > 0"),
    (dict(weight_ramp_cycles=5), r"--weight_ramp_cycles=5 ramps nothing"),
    (dict(soft_weight=-1.0), r"--soft_weight=-1.0 is invalid: use 0"),
    (dict(student_width=0), r"--student_width=0 is invalid"),
    (dict(teacher="missing.keras"), r"--teacher='missing.keras' is invalid: give an existing .keras"),
    (dict(g_width=8), r"--g_width=8 is invalid: only --setup=dcgan\|.*\|dfad reads it and this "
                      r"run is --setup=distill"),
    (dict(penalty="r1"), r"--penalty='r1' is invalid: only --setup=dcgan\|.*\|acgan reads it"),
    (dict(evaluator="inception"), r"--evaluator='inception' is invalid: only --setup=dcgan\|.*"
                                  r"\|cyclegan reads it"),
    (dict(student_lr=0.0), r"--student_lr=0.0 is invalid: learning rates must be positive"),
    (dict(student_updates=0), r"--student_updates=0 is invalid: the student needs at least 1"),
    (dict(d_lr=1e-3, student_lr=2e-3), r"--d_lr=0.001 and --student_lr=0.002: --setup=distill "
                                       r"reads --d_lr as --student_lr; give only --student_lr"),
])
def test_bad_flags_are_refused_before_tensorflow_works(flags, message):
    with pytest.raises(ConfigError, match=message):
        registry.resolve(Config(setup="distill", **flags))


def test_its_flags_are_refused_in_other_setups():
    with pytest.raises(ConfigError, match=r"--temperature=2.0 is invalid: only --setup=distill reads it"):
        registry.resolve(Config(setup="dcgan", temperature=2.0))


def test_data_without_labelled_images_is_refused(tmp_path):
    folder = f"folder:{write_folder(str(tmp_path / 'loose'), 3, side=28)}"
    for dataset, what in (("ring8", r"toy data \(2-D points\)"),
                          (folder, "images without class labels")):
        config = registry.resolve(Config(setup="distill", dataset=dataset))
        with pytest.raises(ConfigError, match=rf"--dataset='{dataset}' has {what}; --setup=distill "
                                              r"trains a classifier on labelled images"):
            Distillation().check_data(config, datasets.dataset_info(dataset))


def test_a_missing_or_misshapen_teacher_is_refused(tmp_path):
    info = datasets.dataset_info("fashion_mnist")
    config = registry.resolve(Config(setup="distill", evaluator_dir=str(tmp_path)))
    with pytest.raises(ConfigError, match=r"--teacher='' names the domain evaluator of --dataset, "
                                          r"which cannot be loaded: No domain evaluator for "
                                          r"fashion_mnist .* --mode=train_evaluator"):
        building.build_run(Distillation(), config, info, tf.distribute.get_strategy())
    wrong = evaluator.build_classifier(input_shape=(28, 28, 1), num_classes=3, width=2, feature_dim=4)
    wrong.save(tmp_path / "three.keras")
    config = registry.resolve(Config(setup="distill", teacher=str(tmp_path / "three.keras")))
    with pytest.raises(ConfigError, match=r"outputs of shape \[\(3,\)\]; this run needs one image "
                                          r"input \(28, 28, 1\) and one output of 10 class logits"):
        building.build_run(Distillation(), config, info, tf.distribute.get_strategy())


def test_the_student_takes_the_discriminators_old_flags_with_one_notice_each(capsys):
    old = api.config(setup="distill", d_lr=3e-3, d_updates=2, d_clip_global_norm=1.0)
    assert capsys.readouterr().err.splitlines() == [
        "notice: --d_lr is now --student_lr for --setup=distill; --d_lr still works.",
        "notice: --d_clip_global_norm is now --student_clip_global_norm for --setup=distill; "
        "--d_clip_global_norm still works.",
        "notice: --d_updates is now --student_updates for --setup=distill; --d_updates still works."]
    assert old == api.config(setup="distill", student_lr=3e-3, student_updates=2,
                             student_clip_global_norm=1.0)
    assert (old.d_lr, old.d_updates, old.loss, old.g_lr) == (None, None, None, None)
    assert Distillation().learning_rates(old) == {"student": LearningRate(3e-3, "constant")}
    phase = student_phase(old, {})
    assert (phase.repeats, phase.clip_norm) == (2, 1.0)


def test_run_py_takes_the_old_name_with_its_notice_before_tensorflow():
    result = run("--setup=distill", "--d_updates=0")
    lines = [line for line in result.stderr.splitlines() if line.startswith(("notice", "error"))]
    assert (result.returncode, lines) == (2, [
        "notice: --d_updates is now --student_updates for --setup=distill; --d_updates still works.",
        "error: --student_updates=0 is invalid: the student needs at least 1 update per cycle."])


def test_a_run_recorded_when_the_student_read_the_discriminators_flags_resumes_with_them(
        teacher, tmp_path):
    flags = dict(setup="distill", logdir=str(tmp_path / "run"), student_width=4, batch_size=16,
                 evaluator_dir=str(teacher / "evaluators"), cycles_per_loop=1, checkpoint_every=1,
                 image_every=0, histogram_every=0, shuffle_buffer=64, precision="float32")
    api.train(api.config(**flags, train_cycles=1))
    path = tmp_path / "run" / RUN_RECORD_FILE
    record = json.loads(path.read_text())
    for flag in ("student_lr", "student_lr_schedule", "student_clip_global_norm", "student_updates"):
        del record[flag]  # an older Gantry had none, and its preset named the GAN flags
    record.update(d_lr=0.003, d_updates=2, d_lr_schedule="constant", d_clip_global_norm=0.0,
                  loss="non_saturating", g_lr=1e-3, g_updates=1, penalty="none")
    path.write_text(json.dumps(record))
    resumed = api.config(**flags, train_cycles=2)
    assert (resumed.student_lr, resumed.student_updates, resumed.d_lr, resumed.loss) == \
        (0.003, 2, None, None)
    assert api.train(resumed).step == 2
    restored = restore.restore(str(tmp_path / "run"), use_ema=False)
    assert (restored.run.student_lr, restored.run.student_updates, restored.step) == (0.003, 2, 2)
    assert restored.built.phases[0].repeats == 2
    assert float(restored.built.optimizers["student"].learning_rate) == pytest.approx(0.003)
