"""Generator against discriminator, unconditional: dcgan, wgan, wgan_gp, lsgan, sngan, r1, r3gan.

The presets differ only in their hyper-parameters; everything else, on images and on the 2-D
toys, is the shared `gans.GAN`'s.
"""

from __future__ import annotations

from trainers.setups.gans import GAN

PRESETS = {
    # Radford et al. 2016 with the non-saturating loss; Adam 2e-4, beta1 0.5. Tuned for sample
    # quality at equal wall clock on Fashion-MNIST (benchmarks/results/quality.md): batch 32,
    # not the paper's 128 (twice the updates per image); the generator at four times D's rate
    # (8e-4); top-k generator training keeping half the fakes after 5,000 cycles; both rates
    # held for 10,000 cycles, then falling as 1 / sqrt(cycle): at constant rates a 60-minute
    # run drifts (FID best at 20-30 minutes, then 18.6-22.6 at 60), while the default run's
    # 6,000 cycles and most of a 10-minute run train exactly as at constant rates ("Long runs").
    "dcgan": dict(loss="non_saturating", optimizer="adam", g_lr=8e-4, d_lr=2e-4,
                    beta1=0.5, beta2=0.999, d_updates=1, batch_size=32, topk=0.5,
                    topk_decay_cycles=5000, g_lr_schedule="inverse_sqrt",
                    d_lr_schedule="inverse_sqrt", lr_hold_cycles=10000),
    # Arjovsky et al. 2017: weight clipping, RMSprop (the paper's: clip 0.01, 5e-5, five critic
    # updates per cycle). Tuned for sample quality at equal wall clock on Fashion-MNIST
    # (benchmarks/results/quality.md, "The WGAN family" and "sngan and wgan recipes"): two critic
    # updates per cycle; the generator at four times the critic's rate (4e-4, critic 1e-4);
    # batch 32; the weights clipped to 0.05: at 0.01 the clipped critic is too weak to lead the
    # generator (10-minute FID 75.1 at 0.01, 50.3 at 0.02, 29.0 at 0.05). Both
    # rates held for 5,000 cycles, then falling as 1 / sqrt(cycle): at constant rates FID rose
    # in the last 10 minutes of an hour on both seeds measured (20.4 -> 24.2, 24.8 -> 35.6; the
    # second run's row with the fall ended at 26.7: "Spectral norm with the gradient through
    # sigma, and wgan's rates decaying").
    "wgan": dict(loss="wasserstein", optimizer="rmsprop", g_lr=4e-4, d_lr=1e-4,
                   beta1=0.0, beta2=0.0, d_updates=2, clip_value=0.05, batch_size=32,
                   g_lr_schedule="inverse_sqrt", d_lr_schedule="inverse_sqrt",
                   lr_hold_cycles=5000),
    # Gulrajani et al. 2017: a Wasserstein critic without batch norm, penalty 10, Adam betas
    # (0, 0.9) at 1e-4. Tuned for sample quality at equal wall clock on Fashion-MNIST
    # (benchmarks/results/quality.md, "The WGAN family"): one critic update per cycle, not five;
    # the penalty lazily, every 4 cycles (weight x 4); the generator at four times the critic's
    # rate (4e-4). Each change lowered the 5-minute FID (69.5 at 2 critic updates -> 24.2).
    "wgan_gp": dict(loss="wasserstein", optimizer="adam", g_lr=4e-4, d_lr=1e-4,
                      beta1=0.0, beta2=0.9, d_updates=1, penalty="gradient_penalty",
                      penalty_weight=10.0, penalty_every=4),
    # Mao et al. 2017: least-squares loss (a=0, b=c=1), Adam 2e-4, beta1 0.5.
    "lsgan": dict(loss="least_squares", optimizer="adam", g_lr=2e-4, d_lr=2e-4,
                    beta1=0.5, beta2=0.999, d_updates=1),
    # Miyato et al. 2018: spectral norm in D (no batch norm), Adam (0.5, 0.999), n_dis 1 -- their
    # best setting for the standard CNN. Tuned for sample quality at equal wall clock on
    # Fashion-MNIST (benchmarks/results/quality.md, "The WGAN family"): the non-saturating loss,
    # which the paper also trains, instead of the hinge; the generator at four times D's rate
    # (8e-4, D at the paper's 2e-4). 5-minute FID 137.0 -> 39.9.
    "sngan": dict(loss="non_saturating", optimizer="adam", g_lr=8e-4, d_lr=2e-4, beta1=0.5,
                    beta2=0.999, d_updates=1, d_spectral_norm=True),
    # Mescheder et al. 2018 / StyleGAN2: non-saturating loss, R1 on real data with gamma 10
    # (weight gamma/2 = 5), evaluated lazily every 16 cycles.
    "r1": dict(loss="non_saturating", optimizer="adam", g_lr=2e-4, d_lr=2e-4, beta1=0.5,
                 beta2=0.999, d_updates=1, penalty="r1", penalty_weight=5.0, penalty_every=16),
    # Huang et al. 2024 (R3GAN): the relativistic pairing loss with R1 on reals and R2 on fakes
    # (weight gamma / 2 each), Adam with beta1 0, and R3GAN's schedules over the run: both rates
    # along a half cosine (to 0 here; R3GAN's to a quarter), beta2 0.9 -> 0.99, gamma falling to
    # a tenth, the EMA half-life rising from 0. R3GAN's CIFAR-10 gamma, 0.05. Its rates, 2e-4 at
    # batch 512, are slow at ours: tuned at equal wall clock on Fashion-MNIST
    # (benchmarks/results/r3gan.md), batch 32, the generator at 8e-4 and D at 2e-4 as in dcgan,
    # R1 + R2 lazily every 4 cycles (weight x 4): 5-minute FID ~193 -> 33.2. R3GAN's own
    # networks (--arch=r3gan, no normalization) need D at the generator's rate (--d_lr=8e-4).
    # The final half-life, 20k images, is set for runs of a few hundred thousand images
    # (R3GAN's 5M images is a quarter of its 20M-image schedule).
    "r3gan": dict(loss="relativistic", optimizer="adam", g_lr=8e-4, d_lr=2e-4, beta1=0.0,
                    beta2=0.9, beta2_final=0.99, d_updates=1, batch_size=32, penalty="r1_r2",
                    penalty_weight=0.025, penalty_every=4, penalty_final_factor=0.1,
                    g_lr_schedule="cosine", d_lr_schedule="cosine", ema_halflife_kimg=20.0,
                    ema_halflife_schedule="cosine"),
}


class UnconditionalGAN(GAN):
    """The unconditional presets (see the module docstring)."""

    presets = PRESETS
