"""The compiled trainer on tiny models and synthetic data: isolation, counts, replicas, resume."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tests.trainers.tiny import IMAGE_INFO, build, synthetic_dataset_fn, tiny_config
from trainers.engine.distribution import make_strategy
from trainers.engine.state import TrainingState
from trainers.engine.trainer import Trainer
from trainers.setups import building, registry

def values(model):
    return [v.numpy().copy() for v in model.variables]


def trainable(model):
    return [v.numpy().copy() for v in model.trainable_variables]


def changed(before, after):
    return [not np.array_equal(a, b) for a, b in zip(before, after)]


def test_discriminator_step_updates_only_discriminator():
    trainer = build(tiny_config(), phase_names={"discriminator"})
    models, optimizers = trainer.state.models, trainer.state.optimizers
    g_before, d_before = trainable(models["generator"]), trainable(models["discriminator"])
    trainer.train(1)
    assert all(changed(d_before, trainable(models["discriminator"])))
    assert not any(changed(g_before, trainable(models["generator"])))
    assert int(optimizers["discriminator"].iterations.numpy()) == 1
    assert int(optimizers["generator"].iterations.numpy()) == 0


def test_generator_step_updates_only_generator():
    trainer = build(tiny_config(), phase_names={"generator"})
    models, optimizers = trainer.state.models, trainer.state.optimizers
    g_before, d_before = trainable(models["generator"]), values(models["discriminator"])
    trainer.train(1)
    assert all(changed(g_before, trainable(models["generator"])))
    # all discriminator variables, not only the trainable ones
    assert not any(changed(d_before, values(models["discriminator"])))
    assert int(optimizers["generator"].iterations.numpy()) == 1
    assert int(optimizers["discriminator"].iterations.numpy()) == 0


def test_k2_alternation_counts_updates_over_several_loops():
    trainer = build(tiny_config(d_updates=2))
    trainer.train(3)
    trainer.train(4, record_gradients=True)
    assert trainer.traces == 1
    optimizers = trainer.state.optimizers
    assert int(trainer.state.step.numpy()) == 7
    assert int(optimizers["discriminator"].iterations.numpy()) == 14
    assert int(optimizers["generator"].iterations.numpy()) == 7


def test_loop_graph_is_the_traced_loop_and_needs_a_trace():
    trainer = build(tiny_config(d_updates=2))
    with pytest.raises(RuntimeError, match="call train"):
        trainer.loop_graph()
    trainer.train(1)

    op_types = {op.type for op in trainer.loop_graph().get_operations()}

    assert "While" in op_types or "StatelessWhile" in op_types
    assert trainer.traces == 1


def test_each_update_adds_its_metrics_with_one_op_and_nothing_divides_by_one_replica():
    trainer = build(tiny_config(d_updates=2))  # 3 updates per cycle, one replica
    trainer.train(1)

    library = trainer.loop_graph().as_graph_def().library
    body = next(f for f in library.function if f.signature.name.startswith("while_body"))
    ops = [node.op for node in body.node_def]

    # One vector of metric sums per phase: one add per update, plus the step's own.
    assert ops.count("AssignAddVariableOp") == 3 + 1
    # Neither the all-reduced gradients (one replica) nor their norm (no loss scaling) are
    # divided by 1.
    divided = [node.input[0] for node in body.node_def if node.op == "RealDiv"]
    assert not [name for name in divided
                if name.startswith(("while/IdentityN", "while/global_norm"))]


def test_metrics_average_every_update_and_gradients_are_recorded():
    trainer = build(tiny_config(d_updates=2))
    output = trainer.train(2, record_gradients=True)
    expected = {f"discriminator/{k}" for k in ("loss", "adversarial", "real_score", "fake_score",
                                                "grad_norm", "learning_rate", "nonfinite")}
    expected |= {"generator/loss", "generator/grad_norm", "generator/learning_rate", "generator/nonfinite"}
    assert set(output.metrics) == expected
    assert output.metrics["discriminator/learning_rate"] == pytest.approx(2e-4, rel=1e-5)
    assert output.metrics["discriminator/loss"] == pytest.approx(output.metrics["discriminator/adversarial"])
    d_variables = trainer.state.models["discriminator"].trainable_variables
    recorded = output.gradients["discriminator"]
    assert list(recorded) == [v.path for v in d_variables]
    assert all(g.shape == tuple(v.shape) for g, v in zip(recorded.values(), d_variables))
    # the recorded gradients are those of the last update: their norm is finite and positive
    norm = np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in recorded.values()))
    assert 0 < norm < np.inf


def test_inverse_sqrt_holds_for_lr_hold_steps_cycles_counted_in_each_optimizers_updates():
    # D updates twice a cycle: 2 cycles of hold are 2 generator updates and 4 critic updates.
    config = tiny_config(d_updates=2, g_lr_schedule="inverse_sqrt", d_lr_schedule="inverse_sqrt",
                         lr_hold_cycles=2)
    trainer = build(config)
    held = trainer.train(2).metrics
    assert held["generator/learning_rate"] == pytest.approx(config.g_lr, rel=1e-6)
    assert held["discriminator/learning_rate"] == pytest.approx(config.d_lr, rel=1e-6)
    falling = trainer.train(2).metrics  # generator updates 2, 3; critic updates 4 to 7
    assert falling["generator/learning_rate"] == pytest.approx(
        config.g_lr * np.mean(np.sqrt([2 / 3, 2 / 4])), rel=1e-5)
    assert falling["discriminator/learning_rate"] == pytest.approx(
        config.d_lr * np.mean(np.sqrt([4 / 5, 4 / 6, 4 / 7, 4 / 8])), rel=1e-5)


def test_two_replicas_match_one_replica_with_the_same_global_batch():
    config = tiny_config()
    single, mirrored = build(config), build(config, replicas=2)
    for name in ("generator", "discriminator"):
        for a, b in zip(single.state.models[name].variables, mirrored.state.models[name].variables):
            b.assign(a)
    single.train(2)
    mirrored.train(2)
    for name in ("generator", "discriminator"):
        for a, b in zip(single.state.models[name].trainable_variables,
                        mirrored.state.models[name].trainable_variables):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6, err_msg=a.path)


@pytest.mark.parametrize("networks", [{}, {"d_dropout": 0.3, "g_extra_blocks": 1, "d_extra_blocks": 1,
                                       "g_upsample": "bilinear"}],
                         ids=["dcgan", "dropout_extra_blocks_and_resize_upsampling"])
def test_resume_from_checkpoint_matches_uninterrupted_run(tmp_path, networks):
    # With dropout, bit-exact resume also needs the dropout layers' seed states in the checkpoint.
    config = tiny_config(d_updates=2, **networks)
    uninterrupted = build(config)
    uninterrupted.train(3)
    uninterrupted.train(2)

    first = build(config)
    first.train(3)
    path = first.state.checkpoint().save(str(tmp_path / "ckpt"))
    resumed = build(config)
    resumed.state.checkpoint().restore(path).assert_existing_objects_matched()
    assert int(resumed.state.step.numpy()) == 3
    resumed.train(2)
    for name in ("generator", "discriminator"):
        for a, b in zip(uninterrupted.state.models[name].variables, resumed.state.models[name].variables):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def test_discriminator_dropout_trains_on_two_replicas_and_changes_the_updates():
    plain, dropout = build(tiny_config(), replicas=2), build(tiny_config(d_dropout=0.5), replicas=2)
    for name in ("generator", "discriminator"):
        for a, b in zip(plain.state.models[name].trainable_variables,
                        dropout.state.models[name].trainable_variables):
            b.assign(a)
    plain.train(2)
    dropout.train(2)
    after = {run: trainable(trainer.state.models["discriminator"])
             for run, trainer in (("plain", plain), ("dropout", dropout))}
    assert all(np.isfinite(value).all() for values in after.values() for value in values)
    # Same weights, same data and noise: only the dropout masks differ.
    assert all(changed(after["plain"], after["dropout"]))


def test_weight_clipping_bounds_the_critic_after_every_update():
    config = tiny_config(setup="wgan", d_updates=2, d_lr=0.5)
    trainer = build(config)
    trainer.train(2)
    for variable in trainer.state.models["discriminator"].trainable_variables:
        assert float(tf.reduce_max(tf.abs(variable))) <= config.clip_value + 1e-7, variable.path


def test_lazy_phase_runs_every_nth_cycle_inside_one_trace():
    config = tiny_config()
    strategy = make_strategy("default")
    built = building.build_run(registry.get(config.setup), config, IMAGE_INFO, strategy)
    discriminator_phase = built.phases[0]
    lazy = dataclasses.replace(discriminator_phase, name="lazy", every=3)
    optimizers = dict(built.optimizers)
    optimizers["lazy"] = tf.keras.optimizers.SGD(1e-3)
    optimizers["lazy"].build(built.models["discriminator"].trainable_variables)
    state = TrainingState.create(models=built.models, optimizers=optimizers)
    trainer = Trainer(strategy=strategy, state=state, phases=(*built.phases, lazy),
                      make_dataset=synthetic_dataset_fn(strategy, config),
                      global_batch_size=config.batch_size, seed=config.seed)
    first = trainer.train(2)   # cycles 0, 1: lazy runs in cycle 0
    second = trainer.train(2)  # cycles 2, 3: lazy runs in cycle 3
    third = trainer.train(1)   # cycle 4: lazy does not run
    assert int(optimizers["lazy"].iterations.numpy()) == 2
    assert int(optimizers["discriminator"].iterations.numpy()) == 5
    assert "lazy/loss" in first.metrics and "lazy/loss" in second.metrics
    assert "lazy/loss" not in third.metrics and "discriminator/loss" in third.metrics
    assert trainer.traces == 1


def test_a_setups_functions_may_branch_on_tensors_in_python():
    # The compiled loop is traced without AutoGraph; a setup's loss, after_update and a private
    # phase's prepare are still converted, so Python `if` on a tensor works in them as in any tf.function
    # (unconverted, each `if` below raises OperatorNotAllowedInGraphError while tracing).
    config = tiny_config(dp_l2_clip=1.0, dp_noise_multiplier=1.0, dp_microbatches=1)
    strategy = make_strategy("default")
    built = building.build_run(registry.get(config.setup), config, IMAGE_INFO, strategy)
    discriminator_phase, *others = built.phases
    privacy = discriminator_phase.privacy
    negated, counted = tf.Variable(0), tf.Variable(0)

    def loss(models, inputs):
        output = discriminator_phase.loss(models, inputs)
        sign = 1.0
        if inputs.cycle % 2 == 1:
            negated.assign_add(1)
            sign = -1.0
        return dataclasses.replace(output, loss=sign * output.loss)

    def prepare(models, inputs):
        prepared = privacy.prepare(models, inputs)
        if inputs.cycle >= 0:
            return prepared
        return {key: -value for key, value in prepared.items()}

    def after_update(models, cycle):
        if cycle % 2 == 0:
            counted.assign_add(1)

    branching = dataclasses.replace(discriminator_phase, loss=loss, after_update=after_update,
                                    privacy=dataclasses.replace(privacy, prepare=prepare))
    state = TrainingState.create(models=built.models, optimizers=built.optimizers)
    trainer = Trainer(strategy=strategy, state=state, phases=(branching, *others),
                      make_dataset=synthetic_dataset_fn(strategy, config),
                      global_batch_size=config.batch_size, seed=config.seed)
    trainer.train(5)  # cycles 0-4: odd ones negate the loss, even ones count
    assert int(negated.numpy()) == 2 and int(counted.numpy()) == 3
    assert trainer.traces == 1


def test_mirrored_strategy_is_one_instance_per_device_set():
    # A second MirroredStrategy over the same devices would reuse the first's collective keys.
    assert make_strategy("mirrored", cpu_replicas=2) is make_strategy("auto", cpu_replicas=2)
