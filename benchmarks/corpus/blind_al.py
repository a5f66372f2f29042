"""The thirty-first blind held-out set (issue 26), part AL: scientific and engineering machine
learning as its practitioners train it, plain PyTorch loops with the README's two lines
(`register_loss` where the script has a loss module), each in the shape of its community's papers
and public code, on models and tasks the earlier sets did not train (they had a Burgers PINN, a
JAX heat-equation PINN, the Deep Ritz method, a Fourier neural operator, DeepONet, a Darcy CNN
surrogate, a wave-equation time-stepper, an E(n)-equivariant GNN, SchNet, CGCNN, SINDy, a Koopman
autoencoder, a Hamiltonian network, PhaseNet and hyperspectral pixels): tiny models on data
generated in-process with real structure, fixed seeds, one CPU thread.

Physics-informed: an inverse problem (the damped oscillator's damping learned as an
`nn.Parameter` beside a tanh network from 30 noisy readings and the ODE residual through
`autograd.grad`; the loss falls to the readings' noise floor and the damping to its true 0.6);
the 2-D Helmholtz benchmark (second derivatives by autograd on collocation points redrawn each
step, a weighted boundary term, Adam then the customary `torch.optim.LBFGS` finish with a strong
Wolfe line search and a closure; the loss starts near 580, the mean squared forcing).

Simulators and surrogates: a graph network simulator of soft particles in a box (radius graph,
encode-process-decode with `index_add_` message passing, the velocity history and wall distances
normalized by the data's statistics, random-walk noise injection with the corrected target
acceleration, the paper's exponential decay); a neural surrogate of a finite-element solver
(tapered cantilevers with a tip spring solved in-process by Hermite beam elements, eight design
variables in the drawings' mm, GPa and kN standardized, log targets, AdamW with
`ReduceLROnPlateau`); bi-fidelity transfer learning (a network trained on 2000 cheap runs, its
first two layers then frozen on purpose with the new optimizer over every parameter, the rest
retrained on 40 expensive runs; it beats the same network trained on the 40 alone); a POD-NN
reduced-order model (an SVD of advection-diffusion snapshots, an MLP from the parameters to 12
modal coefficients); a weather-like U-Net forecasting a temperature field on a latitude-longitude
grid (periodic padding in longitude, BatchNorm, the 6-hour tendency, WeatherBench's
latitude-weighted MSE as a loss module, beating persistence threefold).

Measurements and closures: Raman spectra unmixing (Lorentzian bands under a fluorescence
background, shot noise and cosmic rays; moving average, first derivative and SNV, a 1-D CNN to
softmax mole fractions under `nn.MSELoss`); photometric redshifts by a mixture density network
(ugriz fluxes with non-detections floored at the one-sigma limit before the logarithm, detection
flags, five Gaussians, the NLL by `logsumexp`, which goes negative); jet tagging with a particle
flow network (quark, gluon and top jets as masked sets of constituents, a per-particle map summed
over the jet, `nn.CrossEntropyLoss`; about 78 % accuracy, since quark and gluon jets overlap); a
tensor basis neural network for the Reynolds-stress anisotropy (Pope's ten basis tensors and five
invariants, eight LeakyReLU layers of 30 as in Ling et al.); a Boltzmann generator (RealNVP on
the double well, trained by example on samples of both states, then with the energy's reverse KL
added after 40 % of the steps, which steps the loss down; reweighting recovers the exact share
of the minor state).

Nine buggy twins, one each of nine keys of `BUGS` (all but dead_relu_init), injected the way the
mistake appears in such a script: the oscillator PINN's loop without `optimizer.zero_grad()`
(no_zero_grad); the particle simulator's Adam at 1e-1 typed for 1e-3 (lr_x100); the surrogate's
input scaler left out, so raw millimetres, gigapascals and kilonewtons go in (inputs_x255); the
bi-fidelity freeze slicing the other side of the network, the retrained layers frozen and the
trunk trained (frozen_by_mistake); the U-Net's `model.train()` hoisted above the epoch loop, so
after the first validation it trains in eval mode (train_in_eval_mode); the Raman spectra
shuffled in place "to mix the measurement days" while the mole fractions stay in order
(shuffled_labels); the photo-z magnitudes taken as `-2.5 log10(flux)` straight from a catalogue
that stores non-detections as zero flux, so the features and every loss are NaN (log_zero_nan);
the particle flow network ending in `nn.Softmax` "for the ROC curve" before
`nn.CrossEntropyLoss` (softmax_before_ce); the TBNN's eight hidden layers as sigmoids
(deep_sigmoid).

Written without ever running mldbg's rules on them; health was checked from the losses and each
field's own metrics alone. Only torch and numpy are needed. `SPLIT = BLIND30`.
"""

from __future__ import annotations

import math
import random

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from mldbg.torch import Hook

from . import BLIND30, buggy, healthy

SPLIT = BLIND30

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 3001)


def _mlp(sizes: list[int], act: type[nn.Module] = nn.Tanh, last_act: bool = False) -> nn.Sequential:
    """Linear layers of the given widths with `act` between them (and after the last with
    `last_act`), as one `nn.Sequential` whose indices count layers and activations alike."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_act:
            layers.append(act())
    return nn.Sequential(*layers)


# ============================================================================= PINN: an inverse problem


def _oscillator(t: torch.Tensor, delta: float, omega0: float) -> torch.Tensor:
    """The under-damped oscillator x'' + 2 delta x' + omega0^2 x = 0 from x(0) = 1, x'(0) = 0."""
    omega = math.sqrt(omega0**2 - delta**2)
    return torch.exp(-delta * t) * (torch.cos(omega * t) + delta / omega * torch.sin(omega * t))


def pinn_inverse_damped_oscillator(
    path: str, steps: int = 2500, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A physics-informed network for an inverse problem, as in the tutorials on the damped
    harmonic oscillator: 30 noisy displacement readings (sigma 0.02) of x'' + mu x' + k x = 0
    over four seconds, k known (9 s^-2), the damping mu unknown and learned as an `nn.Parameter`
    beside the tanh network x(t); the loss is the data misfit plus 0.05 times the mean squared
    ODE residual at 80 fixed collocation times, whose derivatives come from `autograd.grad` with
    `create_graph=True`; Adam 2e-3 over network and mu. The loss falls from about 0.4 to 1e-3
    (the noise floor of the readings) and mu goes from 0 to near its true 0.6."""
    _seed(seed)
    delta, omega0 = 0.3, 3.0
    t_obs = torch.sort(torch.rand(30, 1) * 4.0, 0).values
    x_obs = _oscillator(t_obs, delta, omega0) + 0.02 * torch.randn(30, 1)
    t_col = torch.linspace(0, 4, 80).unsqueeze(1).requires_grad_(True)
    net = _mlp([1, 32, 32, 32, 1])
    mu = nn.Parameter(torch.zeros(()))
    optimizer = torch.optim.Adam([*net.parameters(), mu], lr=2e-3)
    hook = Hook(path)
    hook.register_module(net)
    losses: list[float] = []
    for step in range(steps):
        if bug != "no_zero_grad":  # bug: `optimizer.zero_grad()` dropped from the loop
            optimizer.zero_grad()
        x = net(t_col)
        dx = torch.autograd.grad(x, t_col, torch.ones_like(x), create_graph=True)[0]
        ddx = torch.autograd.grad(dx, t_col, torch.ones_like(dx), create_graph=True)[0]
        residual = ddx + mu * dx + omega0**2 * x
        loss = torch.mean((net(t_obs) - x_obs) ** 2) + 0.05 * torch.mean(residual**2)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 500 == 0:
            print(f"step {step}: loss {loss.item():.5f} mu {mu.item():.3f}")
    print(f"learned mu {mu.item():.3f} (true {2 * delta:.3f})")
    hook.close()
    return losses


# ============================================================================= PINN: Helmholtz, Adam then L-BFGS


def pinn_helmholtz_adam_then_lbfgs(
    path: str, adam_steps: int = 1000, lbfgs_steps: int = 15, seed: int = 0
) -> list[float]:
    """The 2-D Helmholtz benchmark of the PINN literature (Wang, Teng and Perdikaris), smaller:
    Laplacian(u) + k^2 u = q on [-1, 1]^2 with k = 1, the forcing q made from the exact solution
    sin(pi x) sin(2 pi y), u = 0 on the boundary; a 2-40-40-40-1 tanh network, the residual at
    256 collocation points redrawn every step, 128 boundary points weighted 10; Adam (1e-3) for
    `adam_steps` steps, then the usual finishing run of `torch.optim.LBFGS` (strong Wolfe line
    search, up to 20 evaluations an outer step) on a fixed set of points. The loss starts at the
    mean squared forcing (about 580), falls to about 1 under Adam and to a few hundredths under
    L-BFGS; the relative L2 error on a 50 x 50 grid ends near 3 %."""
    g = _seed(seed)
    k = 1.0

    def exact(xy: torch.Tensor) -> torch.Tensor:
        return torch.sin(math.pi * xy[:, :1]) * torch.sin(2 * math.pi * xy[:, 1:])

    def forcing(xy: torch.Tensor) -> torch.Tensor:
        return (k**2 - 5 * math.pi**2) * exact(xy)

    def boundary(n: int) -> torch.Tensor:
        s = torch.rand(n, generator=g) * 2 - 1
        side = torch.randint(0, 4, (n,), generator=g)
        fixed = torch.where(side % 2 == 0, -1.0, 1.0)
        return torch.where((side < 2).unsqueeze(1), torch.stack([fixed, s], 1), torch.stack([s, fixed], 1))

    net = _mlp([2, 40, 40, 40, 1])

    def pde_loss(xy: torch.Tensor, xb: torch.Tensor) -> torch.Tensor:
        xy = xy.requires_grad_(True)
        u = net(xy)
        grad = torch.autograd.grad(u, xy, torch.ones_like(u), create_graph=True)[0]
        u_xx = torch.autograd.grad(grad[:, 0].sum(), xy, create_graph=True)[0][:, 0:1]
        u_yy = torch.autograd.grad(grad[:, 1].sum(), xy, create_graph=True)[0][:, 1:2]
        residual = u_xx + u_yy + k**2 * u - forcing(xy)
        return torch.mean(residual**2) + 10.0 * torch.mean(net(xb) ** 2)

    hook = Hook(path)
    hook.register_module(net)
    losses: list[float] = []
    adam = torch.optim.Adam(net.parameters(), lr=1e-3)
    for step in range(adam_steps):
        adam.zero_grad()
        loss = pde_loss(torch.rand(256, 2, generator=g) * 2 - 1, boundary(128))
        loss.backward()
        adam.step()
        losses.append(loss.item())
        if step % 200 == 0:
            print(f"adam {step}: loss {loss.item():.4f}")
    xy_fixed, xb_fixed = torch.rand(512, 2, generator=g) * 2 - 1, boundary(256)
    lbfgs = torch.optim.LBFGS(
        net.parameters(), lr=1.0, max_iter=20, history_size=50, line_search_fn="strong_wolfe"
    )

    def closure() -> torch.Tensor:
        lbfgs.zero_grad()
        loss = pde_loss(xy_fixed.detach(), xb_fixed)
        loss.backward()
        return loss

    for step in range(lbfgs_steps):
        loss = lbfgs.step(closure)
        losses.append(loss.item())
        print(f"lbfgs {step}: loss {loss.item():.5f}")
    grid = torch.stack(
        torch.meshgrid(torch.linspace(-1, 1, 50), torch.linspace(-1, 1, 50), indexing="ij"), -1
    )
    grid = grid.reshape(-1, 2)
    with torch.no_grad():
        err = torch.linalg.norm(net(grid) - exact(grid)) / torch.linalg.norm(exact(grid))
    print(f"relative L2 error {err.item():.4f}")
    hook.close()
    return losses


# ============================================================================= graph network simulator


def _particle_trajectories(rng: np.random.Generator, n_traj: int, n_particles: int, steps: int) -> np.ndarray:
    """Positions (trajectory, time, particle, 2) of soft spheres in the unit box: gravity, a
    linear repulsion between particles closer than 0.06 and from walls closer than 0.05, a
    little drag, semi-implicit Euler with four substeps of every recorded step of 0.01 s."""
    out = np.zeros((n_traj, steps, n_particles, 2))
    for k in range(n_traj):
        x = rng.uniform(0.1, 0.9, (n_particles, 2))
        v = rng.normal(0, 0.5, (n_particles, 2))
        for t in range(steps):
            for _ in range(4):
                d = x[:, None] - x[None]
                dist = np.linalg.norm(d, axis=-1) + np.eye(n_particles)
                push = np.clip(0.06 - dist, 0, None) / dist
                walls = np.clip(0.05 - x, 0, None) - np.clip(x - 0.95, 0, None)
                a = 400.0 * ((push[..., None] * d).sum(1) + walls) - np.array([0.0, 1.0]) - 0.1 * v
                v = v + 0.0025 * a
                x = x + 0.0025 * v
            out[k, t] = x
    return out


class _InteractionNetwork(nn.Module):
    """One message-passing step of the encode-process-decode simulator: an edge MLP on the
    edge and its two nodes, a node MLP on the node and the sum of its incoming edges, both
    residual and LayerNormed."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.edge = nn.Sequential(_mlp([3 * width, width, width], nn.ReLU), nn.LayerNorm(width))
        self.node = nn.Sequential(_mlp([2 * width, width, width], nn.ReLU), nn.LayerNorm(width))

    def forward(self, h: torch.Tensor, e: torch.Tensor, senders: torch.Tensor, receivers: torch.Tensor):
        e = e + self.edge(torch.cat([e, h[senders], h[receivers]], 1))
        incoming = torch.zeros_like(h).index_add_(0, receivers, e)
        return h + self.node(torch.cat([h, incoming], 1)), e


class _GraphNetworkSimulator(nn.Module):
    """Sanchez-Gonzalez et al.'s encode-process-decode network, small: node and edge encoders,
    three interaction steps with their own weights, an MLP decoder to the normalized
    acceleration."""

    def __init__(self, node_in: int, edge_in: int = 3, width: int = 48, steps: int = 3) -> None:
        super().__init__()
        self.node_encoder = nn.Sequential(_mlp([node_in, width, width], nn.ReLU), nn.LayerNorm(width))
        self.edge_encoder = nn.Sequential(_mlp([edge_in, width, width], nn.ReLU), nn.LayerNorm(width))
        self.processor = nn.ModuleList(_InteractionNetwork(width) for _ in range(steps))
        self.decoder = _mlp([width, width, 2], nn.ReLU)

    def forward(
        self, nodes: torch.Tensor, edges: torch.Tensor, senders: torch.Tensor, receivers: torch.Tensor
    ):
        h, e = self.node_encoder(nodes), self.edge_encoder(edges)
        for block in self.processor:
            h, e = block(h, e, senders, receivers)
        return self.decoder(h)


def gns_particles_noise_injection(
    path: str, steps: int = 600, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A graph network simulator for particles trained as in "Learning to Simulate Complex
    Physics with Graph Networks": features of the last five velocities (normalized by the
    training set's velocity statistics) and the clipped distances to the four walls, a radius
    graph (0.12) with relative displacements and distances on the edges, random-walk noise
    (sigma 2e-5) on the input positions with the target acceleration corrected for it, the MSE
    on the normalized acceleration, Adam (1e-3) with the paper's exponential decay, four time
    steps of random trajectories batched as one graph. The loss starts near 1 (the normalized
    accelerations' variance) and falls to about 0.05; the one-step position error on a held-out
    trajectory ends about 13 times below the constant-velocity guess's."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 41)
    n_particles, history, radius = 16, 6, 0.12
    traj = torch.from_numpy(_particle_trajectories(rng, 7, n_particles, 160)).float()
    train_traj, test_traj = traj[:6], traj[6:]
    vel = train_traj[:, 1:] - train_traj[:, :-1]
    acc = vel[:, 1:] - vel[:, :-1]
    vel_mean, vel_std = vel.mean((0, 1, 2)), vel.std((0, 1, 2))
    acc_mean, acc_std = acc.mean((0, 1, 2)), acc.std((0, 1, 2))

    def graph(window: torch.Tensor, offset: int):
        velocities = (window[1:] - window[:-1] - vel_mean) / vel_std
        last = window[-1]
        walls = torch.cat([last, 1.0 - last], 1).clamp(max=radius) / radius
        nodes = torch.cat([velocities.permute(1, 0, 2).reshape(n_particles, -1), walls], 1)
        d = last[:, None] - last[None]
        dist = d.norm(dim=-1)
        senders, receivers = torch.nonzero((dist < radius) & (dist > 0), as_tuple=True)
        edges = torch.cat([d[senders, receivers] / radius, dist[senders, receivers, None] / radius], 1)
        return nodes, edges, senders + offset, receivers + offset

    def batch(windows: list[torch.Tensor]):
        parts = [graph(w, i * n_particles) for i, w in enumerate(windows)]
        return [torch.cat([p[j] for p in parts]) for j in range(4)]

    model = _GraphNetworkSimulator(2 * (history - 1) + 4)
    loss_fn = nn.MSELoss()
    lr = 1e-1 if bug == "lr_x100" else 1e-3  # bug: 1e-1 typed for 1e-3
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.1 ** (s / 2000))
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for step in range(steps):
        windows, targets = [], []
        for _ in range(4):
            k = int(torch.randint(0, 6, (), generator=g))
            t = int(torch.randint(history, train_traj.shape[1] - 1, (), generator=g))
            window = train_traj[k, t - history + 1 : t + 1]
            noise = torch.randn(window.shape, generator=g).mul(2e-5 / math.sqrt(history - 1)).cumsum(0)
            noisy = window + noise - noise[:1]
            target = (train_traj[k, t + 1] - noisy[-1]) - (noisy[-1] - noisy[-2])
            windows.append(noisy)
            targets.append((target - acc_mean) / acc_std)
        nodes, edges, senders, receivers = batch(windows)
        optimizer.zero_grad()
        loss = loss_fn(model(nodes, edges, senders, receivers), torch.cat(targets))
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    model.eval()
    errors, baseline = [], []
    with torch.no_grad():
        for t in range(history, test_traj.shape[1] - 1):
            window = test_traj[0, t - history + 1 : t + 1]
            a = model(*batch([window])) * acc_std + acc_mean
            nxt = 2 * window[-1] - window[-2]
            errors.append(((nxt + a - test_traj[0, t + 1]) ** 2).mean().item())
            baseline.append(((nxt - test_traj[0, t + 1]) ** 2).mean().item())
    print(f"one-step position MSE {np.mean(errors):.3e} (constant velocity {np.mean(baseline):.3e})")
    hook.close()
    return losses


# ============================================================================= Boltzmann generator


def _double_well_energy(x: torch.Tensor) -> torch.Tensor:
    """Noe et al.'s two-dimensional double well, in units of kT: 0.25 x1^4 - 3 x1^2 + x1 +
    0.5 x2^2, two states near x1 = -2.6 and x1 = 2.3 with a barrier of about 9 kT between."""
    x1, x2 = x[:, 0], x[:, 1]
    return 0.25 * x1**4 - 3.0 * x1**2 + x1 + 0.5 * x2**2


def _metropolis(rng: np.random.Generator, start: float, n: int, thin: int = 10) -> np.ndarray:
    """`n` samples of the double well by random-walk Metropolis (step 0.4) started in one
    state, kept every `thin` moves: the "MD data" of one metastable state."""

    def energy(x: np.ndarray) -> float:
        return 0.25 * x[0] ** 4 - 3.0 * x[0] ** 2 + x[0] + 0.5 * x[1] ** 2

    x = np.array([start, 0.0])
    e = energy(x)
    out = np.zeros((n, 2))
    steps, uniforms = rng.normal(0, 0.4, (n * thin, 2)), rng.random(n * thin)
    for i in range(n * thin):
        y = x + steps[i]
        f = energy(y)
        if uniforms[i] < math.exp(min(0.0, e - f)):
            x, e = y, f
        if i % thin == thin - 1:
            out[i // thin] = x
    return out


class _AffineCoupling(nn.Module):
    """A RealNVP coupling layer in two dimensions: one coordinate, unchanged, parametrizes a
    scale (through tanh) and a shift of the other."""

    def __init__(self, keep: int, hidden: int = 64) -> None:
        super().__init__()
        self.keep = keep
        self.net = _mlp([1, hidden, hidden, 2], nn.ReLU)
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def _scale_shift(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s, t = self.net(x[:, self.keep : self.keep + 1]).chunk(2, 1)
        return torch.tanh(s).squeeze(1), t.squeeze(1)

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Latent to configuration, with log |det J|."""
        s, t = self._scale_shift(z)
        x = z.clone()
        x[:, 1 - self.keep] = z[:, 1 - self.keep] * torch.exp(s) + t
        return x, s

    def inverse(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s, t = self._scale_shift(x)
        z = x.clone()
        z[:, 1 - self.keep] = (x[:, 1 - self.keep] - t) * torch.exp(-s)
        return z, -s


class _RealNVP(nn.Module):
    def __init__(self, layers: int = 8) -> None:
        super().__init__()
        self.couplings = nn.ModuleList(_AffineCoupling(i % 2) for i in range(layers))

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logdet = torch.zeros(len(z))
        for layer in self.couplings:
            z, ld = layer(z)
            logdet = logdet + ld
        return z, logdet

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        logdet = torch.zeros(len(x))
        for layer in reversed(self.couplings):
            x, ld = layer.inverse(x)
            logdet = logdet + ld
        return -0.5 * (x**2).sum(1) - math.log(2 * math.pi) + logdet


def boltzmann_generator_double_well(path: str, steps: int = 1000, seed: int = 0) -> list[float]:
    """A Boltzmann generator (Noe, Olsson, Koehler and Wu 2019) on their two-dimensional double
    well: a RealNVP of eight affine couplings (last layers zero-initialized, so it starts as the
    identity), trained by example on Metropolis samples of both metastable states (as many of
    each, though the Boltzmann distribution gives the right state about 1 % of the mass), then,
    after 40 % of the steps, by example plus 0.2 times the energy (reverse KL) loss on 256
    samples of the latent Gaussian; Adam 1e-3, batches of 256. The loss is the negative
    log-likelihood per sample, from about 5.5 to 1.8, then steps down to about 0 when the KL term
    joins (the mean reduced energy of generated samples, near -10 kT, less their entropy). The
    generator over-samples the minor state (about 4 % against 0.8 %), and reweighting its samples by
    exp(-U) / q recovers the exact share, as the method intends."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 53)
    data = torch.from_numpy(
        np.concatenate([_metropolis(rng, -2.6, 1500), _metropolis(rng, 2.3, 1500)])
    ).float()
    flow = _RealNVP()
    optimizer = torch.optim.Adam(flow.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(flow)
    losses: list[float] = []
    for step in range(steps):
        batch = data[torch.randint(0, len(data), (256,), generator=g)]
        optimizer.zero_grad()
        loss = -flow.log_prob(batch).mean()
        if step >= 0.4 * steps:
            x, logdet = flow(torch.randn(256, 2, generator=g))
            loss = loss + 0.2 * (_double_well_energy(x) - logdet).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 200 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    grid = torch.stack(
        torch.meshgrid(torch.linspace(-5, 5, 400), torch.linspace(-5, 5, 400), indexing="ij"), -1
    )
    weights = torch.exp(-_double_well_energy(grid.reshape(-1, 2)))
    exact = (weights * (grid.reshape(-1, 2)[:, 0] > 0)).sum() / weights.sum()
    with torch.no_grad():
        x, _ = flow(torch.randn(20000, 2, generator=g))
        w = torch.softmax(-_double_well_energy(x) - flow.log_prob(x), 0)
    print(
        f"right state: generated {(x[:, 0] > 0).float().mean():.4f}, reweighted {(w * (x[:, 0] > 0)).sum():.4f}, "
        f"exact {exact:.4f}; mean energy {_double_well_energy(x).mean():.2f} kT"
    )
    hook.close()
    return losses


# ============================================================================= finite-element surrogate


def _tapered_cantilever_fe(p: np.ndarray, n_el: int = 16) -> np.ndarray:
    """Tip deflection (mm) and largest bending stress (MPa) of tapered cantilevers, by the
    finite-element method: Euler-Bernoulli Hermite elements, the section's second moment at
    each element's midpoint, a uniform load by consistent nodal loads, a point load and a
    spring support at the tip, the root clamped, one batched `np.linalg.solve`. The columns of
    `p` are in engineering units: span (mm), width (mm), root depth (mm), tip/root depth ratio,
    Young's modulus (GPa), tip load (kN), uniform load (kN/m), tip spring (kN/mm)."""
    n = len(p)
    span, width, depth = p[:, 0] / 1e3, p[:, 1] / 1e3, p[:, 2] / 1e3
    taper, modulus, tip_load = p[:, 3], p[:, 4] * 1e9, p[:, 5] * 1e3
    line_load, spring = p[:, 6] * 1e3, p[:, 7] * 1e6
    le = span / n_el
    mid = (np.arange(n_el) + 0.5) / n_el
    h = depth[:, None] * (1 - (1 - taper[:, None]) * mid[None])
    inertia = width[:, None] * h**3 / 12
    dofs = 2 * (n_el + 1)
    k_global = np.zeros((n, dofs, dofs))
    f_global = np.zeros((n, dofs))
    unit = np.array([[12, 6, -12, 6], [6, 4, -6, 2], [-12, -6, 12, -6], [6, 2, -6, 4]], float)
    powers = np.array([[0, 1, 0, 1], [1, 2, 1, 2], [0, 1, 0, 1], [1, 2, 1, 2]])
    k_elements = []
    for e in range(n_el):
        ke = (modulus * inertia[:, e] / le**3)[:, None, None] * unit[None] * le[:, None, None] ** powers[None]
        fe = line_load[:, None] * np.stack([le / 2, le**2 / 12, le / 2, -(le**2) / 12], 1)
        k_global[:, 2 * e : 2 * e + 4, 2 * e : 2 * e + 4] += ke
        f_global[:, 2 * e : 2 * e + 4] += fe
        k_elements.append((ke, fe))
    f_global[:, -2] += tip_load
    k_global[:, -2, -2] += spring
    u = np.zeros((n, dofs))
    u[:, 2:] = np.linalg.solve(k_global[:, 2:, 2:], f_global[:, 2:, None])[..., 0]
    stress = np.zeros(n)
    for e, (ke, fe) in enumerate(k_elements):
        end_forces = np.einsum("nij,nj->ni", ke, u[:, 2 * e : 2 * e + 4]) - fe
        moment = np.maximum(np.abs(end_forces[:, 1]), np.abs(end_forces[:, 3]))
        stress = np.maximum(stress, moment * (h[:, e] / 2) / inertia[:, e])
    return np.stack([np.abs(u[:, -2]) * 1e3, stress / 1e6], 1)


def fe_cantilever_surrogate_mlp(
    path: str, epochs: int = 40, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A neural surrogate of a finite-element model, as engineers fit one to a design space:
    3000 tapered steel-to-aluminium cantilevers sampled over eight design variables in the
    units of the drawings (span 1-4 m in mm, width, root depth, taper, E in GPa, tip load in
    kN, uniform load in kN/m, a tip spring in kN/mm), each solved by `_tapered_cantilever_fe`;
    the inputs standardized with the training set's statistics, the targets' logarithms
    (deflection and stress span decades) standardized too, a 8-64-64-64-2 SiLU MLP,
    `nn.MSELoss`, AdamW (2e-3) with `ReduceLROnPlateau` on the validation loss, batches of 64.
    The loss falls from about 1 to about 1e-3; the median relative errors of the validation
    deflections and stresses end near 2 %."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 67)
    n = 3000
    low = np.array([1000, 50, 100, 0.4, 70, 1, 0, 0.01])
    high = np.array([4000, 200, 400, 1.0, 210, 50, 20, 2.0])
    design = low + (high - low) * rng.random((n, 8))
    response = _tapered_cantilever_fe(design)
    x = torch.from_numpy(design).float()
    y = torch.from_numpy(np.log(response)).float()
    x_tr, y_tr, x_va, y_va = x[:2400], y[:2400], x[2400:], y[2400:]
    if bug != "inputs_x255":  # bug: the scaler of the inputs left out, raw mm, GPa and kN go in
        x_mean, x_std = x_tr.mean(0), x_tr.std(0)
        x_tr, x_va = (x_tr - x_mean) / x_std, (x_va - x_mean) / x_std
    y_mean, y_std = y_tr.mean(0), y_tr.std(0)
    y_tr, y_va = (y_tr - y_mean) / y_std, (y_va - y_mean) / y_std
    model = _mlp([8, 64, 64, 64, 2], nn.SiLU)
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=3)
    loader = DataLoader(TensorDataset(x_tr, y_tr), batch_size=64, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            pred = model(x_va)
            valid_loss = loss_fn(pred, y_va).item()
        scheduler.step(valid_loss)
        if epoch % 10 == 9:
            print(f"epoch {epoch}: valid loss {valid_loss:.5f}")
    rel = (torch.exp(pred * y_std + y_mean) / torch.exp(y_va * y_std + y_mean) - 1).abs().median(0).values
    print(f"median relative error: deflection {rel[0]:.4f}, stress {rel[1]:.4f}")
    hook.close()
    return losses


# ============================================================================= bi-fidelity transfer learning


def _high_fidelity(x: torch.Tensor) -> torch.Tensor:
    """The expensive model's response over three normalized design variables."""
    return (
        torch.sin(2 * math.pi * x[:, :1]) * x[:, 1:2]
        + 0.5 * x[:, 2:3] ** 2
        + 0.3 * torch.sin(5 * x[:, 1:2] * x[:, 2:3])
    )


def _low_fidelity(x: torch.Tensor) -> torch.Tensor:
    """A cheap model of the same response with the systematic errors of a coarse mesh: 20 %
    too stiff and a smooth bias."""
    return 0.8 * _high_fidelity(x) - 0.2 * x[:, :1] + 0.1 * torch.cos(3 * x[:, 2:3])


def bifidelity_transfer_learning(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Bi-fidelity transfer learning (as in De, Britton, Reynolds, Skinner, Jansen and Doostan
    2020): a 3-64-64-64-1 tanh MLP trained on 2000 runs of a cheap low-fidelity model (800 Adam
    steps at 1e-3, batches of 128), then its first two layers frozen on purpose
    (`requires_grad_(False)`, the new optimizer over all parameters, so the frozen ones simply
    get no gradient) and the last hidden layer and the output retrained on 40 runs of the
    expensive model (600 full-batch steps at 5e-4); `nn.MSELoss` throughout, one hook. The loss
    falls to about 3e-3 on the low-fidelity data, jumps to the low-fidelity model's misfit of
    the expensive one and falls to about 1e-3; the test RMSE against the expensive model drops
    from about 0.21 (low fidelity) to about 0.07 (the same network trained on the 40 expensive
    runs alone reaches about 0.10)."""
    g = _seed(seed)
    x_low = torch.rand(2000, 3, generator=g)
    y_low = _low_fidelity(x_low)
    x_high, x_test = torch.rand(40, 3, generator=g), torch.rand(500, 3, generator=g)
    y_high, y_test = _high_fidelity(x_high), _high_fidelity(x_test)
    model = _mlp([3, 64, 64, 64, 1])
    loss_fn = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(800):
        idx = torch.randint(0, len(x_low), (128,), generator=g)
        optimizer.zero_grad()
        loss = loss_fn(model(x_low[idx]), y_low[idx])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        print(f"low-fidelity model: test RMSE {loss_fn(model(x_test), y_test).sqrt():.4f}")
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4)
    # model: Linear, Tanh, Linear, Tanh | Linear, Tanh, Linear; the trunk is frozen, the rest retrained
    trunk = model[4:] if bug == "frozen_by_mistake" else model[:4]  # bug: the slice of the other side
    trunk.requires_grad_(False)
    for _ in range(600):
        optimizer.zero_grad()
        loss = loss_fn(model(x_high), y_high)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        print(
            f"after transfer: train {loss.item():.2e}, test RMSE {loss_fn(model(x_test), y_test).sqrt():.4f}"
        )
    hook.close()
    return losses


# ============================================================================= weather-like U-Net


def _zonal_flow_fields(rng: np.random.Generator, n_traj: int, steps: int, n_lat: int = 24, n_lon: int = 48):
    """Temperature-like fields (K) on a latitude-longitude grid: a climatology warm at the
    equator, smooth anomalies carried east by a jet in each hemisphere (a fractional shift
    along longitude per latitude, by FFT), diffused north-south, relaxed towards the
    climatology and stirred by weak random forcing; `steps` 6-hourly states per trajectory."""
    lat = np.linspace(-86.25, 86.25, n_lat)
    clim = 250 + 50 * np.cos(np.deg2rad(lat)) ** 2
    speed = 0.5 + 2.5 * (np.exp(-(((lat - 45) / 12) ** 2)) + np.exp(-(((lat + 45) / 12) ** 2)))
    k = np.fft.rfftfreq(n_lon, 1 / n_lon)
    shift = np.exp(-2j * np.pi * k[None] * speed[:, None] / n_lon)

    def smooth_noise(scale: float) -> np.ndarray:
        spec = np.zeros((n_lat, n_lon // 2 + 1), complex)
        spec[:, 1:6] = rng.normal(0, 1, (n_lat, 5)) + 1j * rng.normal(0, 1, (n_lat, 5))
        field = np.fft.irfft(spec, n_lon, axis=1)
        for _ in range(4):
            field = (np.roll(field, 1, 0) + 2 * field + np.roll(field, -1, 0)) / 4
        return scale * field / field.std()

    out = np.zeros((n_traj, steps, n_lat, n_lon))
    for j in range(n_traj):
        anomaly = smooth_noise(8.0)
        for t in range(steps):
            anomaly = np.fft.irfft(np.fft.rfft(anomaly, axis=1) * shift, n_lon, axis=1)
            padded = np.concatenate([anomaly[:1], anomaly, anomaly[-1:]])
            anomaly = anomaly + 0.15 * (padded[2:] - 2 * anomaly + padded[:-2])
            anomaly = 0.97 * anomaly + smooth_noise(0.3)
            out[j, t] = clim[:, None] + anomaly
    return out, lat


class _PeriodicConv(nn.Module):
    """A 3x3 convolution padded circularly in longitude and by replication at the poles."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.pad(F.pad(x, (1, 1, 0, 0), mode="circular"), (0, 0, 1, 1), mode="replicate")
        return self.conv(x)


def _double_conv(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        _PeriodicConv(c_in, c_out), nn.BatchNorm2d(c_out), nn.ReLU(),
        _PeriodicConv(c_out, c_out), nn.BatchNorm2d(c_out), nn.ReLU(),
    )  # fmt: skip


class _WeatherUNet(nn.Module):
    """A two-level U-Net over the globe: periodic convolutions, BatchNorm, max-pooling down,
    nearest upsampling and a skip connection up, a 1x1 head to the normalized 6-hour tendency."""

    def __init__(self, c_in: int = 4, width: int = 12) -> None:
        super().__init__()
        self.down1 = _double_conv(c_in, width)
        self.down2 = _double_conv(width, 2 * width)
        self.up = _double_conv(3 * width, width)
        self.head = nn.Conv2d(width, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h1 = self.down1(x)
        h2 = self.down2(F.max_pool2d(h1, 2))
        return self.head(self.up(torch.cat([h1, F.interpolate(h2, scale_factor=2)], 1)))


class _LatitudeWeightedMSE(nn.Module):
    """WeatherBench's loss: the squared error weighted by cos(latitude), the weights averaging 1."""

    def __init__(self, lat: np.ndarray) -> None:
        super().__init__()
        w = torch.from_numpy(np.cos(np.deg2rad(lat))).float()
        self.register_buffer("weights", (w / w.mean()).view(1, 1, -1, 1))

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return (self.weights * (pred - target) ** 2).mean()


def weather_unet_latitude_weighted(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A data-driven 6-hour forecaster of a temperature-like field in the WeatherBench manner:
    the two latest states (normalized by the training set's mean and standard deviation) and
    two static channels (sin and cos of latitude) in, the normalized tendency out, added to
    the latest state; `_WeatherUNet`, the latitude-weighted MSE as a loss module, Adam 2e-3 with
    `CosineAnnealingLR` over the epochs, batches of 16, ten trajectories to train and two to
    validate, the latitude-weighted RMSE in kelvin each epoch against persistence. The loss
    falls from about 0.75 to about 0.1 and the validation RMSE to a third of persistence's."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 79)
    fields, lat = _zonal_flow_fields(rng, 12, 34)
    fields = torch.from_numpy(fields).float()
    mean, std = fields[:10].mean(), fields[:10].std()
    norm = (fields - mean) / std
    static = torch.stack(
        [torch.from_numpy(np.sin(np.deg2rad(lat))).float().view(-1, 1).expand(24, 48),
         torch.from_numpy(np.cos(np.deg2rad(lat))).float().view(-1, 1).expand(24, 48)]
    )  # fmt: skip

    def samples(traj: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        prev, cur, nxt = traj[:, :-2], traj[:, 1:-1], traj[:, 2:]
        x = torch.stack([cur, prev], 2).flatten(0, 1)
        x = torch.cat([x, static.expand(len(x), -1, -1, -1)], 1)
        return x, (nxt - cur).flatten(0, 1).unsqueeze(1)

    x_tr, y_tr = samples(norm[:10])
    x_va, y_va = samples(norm[10:])
    tendency_std = y_tr.std()
    model = _WeatherUNet()
    loss_fn = _LatitudeWeightedMSE(lat)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    loader = DataLoader(TensorDataset(x_tr, y_tr / tendency_std), batch_size=16, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    if bug == "train_in_eval_mode":  # bug: `model.train()` hoisted out of the epoch loop
        model.train()
    for epoch in range(epochs):
        if bug != "train_in_eval_mode":
            model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            pred = model(x_va) * tendency_std
        rmse = (loss_fn.weights * (pred - y_va) ** 2).mean().sqrt() * std
        persistence = (loss_fn.weights * y_va**2).mean().sqrt() * std
        print(
            f"epoch {epoch}: loss {loss.item():.4f} valid RMSE {rmse:.3f} K (persistence {persistence:.3f} K)"
        )
    hook.close()
    return losses


# ============================================================================= Raman spectra unmixing


def _raman_mixtures(rng: np.random.Generator, n: int, n_components: int = 5, n_points: int = 448):
    """Raman spectra of mixtures over 400-1800 cm^-1: pure components of 3 to 6 Lorentzian
    bands, Dirichlet mole fractions, a random integration time scaling the counts, a broad
    fluorescence background several times the Raman signal, shot and read noise, and a cosmic
    ray spike in one spectrum of three."""
    shift = np.linspace(400, 1800, n_points)
    pure = np.zeros((n_components, n_points))
    for k in range(n_components):
        for _ in range(rng.integers(3, 7)):
            centre, width = rng.uniform(450, 1750), rng.uniform(6, 18)
            pure[k] += rng.uniform(0.3, 1.0) / (1 + ((shift - centre) / width) ** 2)
    fractions = rng.dirichlet(np.ones(n_components), n)
    counts = rng.uniform(300, 1500, (n, 1)) * (fractions @ pure)
    x = (shift - 400) / 1400
    background = (
        rng.uniform(500, 3000, (n, 1)) * np.exp(-rng.uniform(0.5, 2.0, (n, 1)) * x)
        + rng.uniform(0, 800, (n, 1)) * x**2
    )
    spectra = rng.poisson(counts + background) + rng.normal(0, 5, (n, n_points))
    spiky = rng.random(n) < 1 / 3
    spectra[spiky, rng.integers(0, n_points, spiky.sum())] += rng.uniform(2000, 8000, spiky.sum())
    return spectra.astype(np.float32), fractions.astype(np.float32)


class _SpectralCNN(nn.Module):
    """A 1-D CNN from a preprocessed spectrum to mole fractions (a softmax, so they sum to 1)."""

    def __init__(self, n_components: int = 5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 16, 9, padding=4), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(16, 32, 7, padding=3), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(32, 32, 5, padding=2), nn.ReLU(), nn.AdaptiveAvgPool1d(8),
        )  # fmt: skip
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, n_components))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.head(self.features(x)), 1)


def raman_unmixing_cnn1d(path: str, epochs: int = 15, seed: int = 0, bug: str | None = None) -> list[float]:
    """Quantifying the components of mixtures from Raman spectra, as chemometrics groups train a
    1-D CNN: the usual preprocessing (a five-point moving average, the first derivative, which
    removes most of the fluorescence background, then the standard normal variate of each
    spectrum), the mole fractions as targets of a softmax output under `nn.MSELoss`, a random
    80/20 split, Adam 1e-3 with batches of 64, the validation RMSE of the fractions per epoch.
    The loss falls from about 0.04 (the fractions' variance) to about 1e-3, a validation RMSE
    of about 0.04."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 83)
    spectra, fractions = _raman_mixtures(rng, 2500)
    if bug == "shuffled_labels":  # bug: the spectra shuffled in place "to mix the days", not the fractions
        rng.shuffle(spectra)
    smooth = np.apply_along_axis(lambda s: np.convolve(s, np.ones(5) / 5, mode="same"), 1, spectra)
    deriv = np.diff(smooth[:, 2:-2], axis=1)
    snv = (deriv - deriv.mean(1, keepdims=True)) / deriv.std(1, keepdims=True)
    x = torch.from_numpy(snv).float().unsqueeze(1)
    y = torch.from_numpy(fractions)
    order = torch.randperm(len(x), generator=g)
    tr, va = order[:2000], order[2000:]
    model = _SpectralCNN()
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(x[tr], y[tr]), batch_size=64, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            rmse = loss_fn(model(x[va]), y[va]).sqrt().item()
        if epoch % 3 == 2:
            print(f"epoch {epoch}: loss {loss.item():.5f} valid RMSE {rmse:.4f}")
    hook.close()
    return losses


# ============================================================================= photometric redshifts


def _galaxy_catalogue(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A ugriz catalogue of galaxies: redshifts from a gamma distribution (most below 1.5), a
    spectral type from red to blue, colours from the 4000 A break passing through the bands as
    the redshift grows (its strength set by the type) and a Lyman-break dropout in u above
    z = 2.4; i-band magnitudes 19 to 24.5, fluxes in nanojansky-like units (zero point 30),
    Gaussian flux errors of a survey whose 5-sigma depths are 25.0, 25.5, 25.3, 24.8, 24.0;
    as the survey ships them, fluxes below one sigma are set to 0 with a non-detection flag."""
    z = np.clip(rng.gamma(2.2, 0.35, n), 0.02, 3.5)
    t = rng.random(n)
    strength = 0.3 + 1.5 * (1 - t)
    crossing = np.array([0.05, 0.4, 0.8, 1.15])
    colours = 0.15 + strength[:, None] * np.exp(-(((z[:, None] - crossing) / 0.3) ** 2))
    colours += 0.2 * (1 - t)[:, None] + 0.05 * z[:, None]
    colours[:, 0] += 2.5 * (z > 2.4)
    i_mag = rng.uniform(19, 24.5, n)
    mags = np.stack(
        [i_mag + colours[:, 2] + colours[:, 1] + colours[:, 0], i_mag + colours[:, 2] + colours[:, 1],
         i_mag + colours[:, 2], i_mag, i_mag - colours[:, 3]], 1,
    )  # fmt: skip
    flux = 10 ** (-0.4 * (mags - 30))
    sigma = 10 ** (-0.4 * (np.array([25.0, 25.5, 25.3, 24.8, 24.0]) - 30)) / 5
    observed = flux + sigma * rng.normal(0, 1, flux.shape)
    detected = observed > sigma
    return np.where(detected, observed, 0.0), detected, z


def _mdn_nll(params: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """The negative log-likelihood of `z` under a Gaussian mixture whose logits, means and log
    standard deviations are the three thirds of `params`."""
    logits, mu, log_sigma = params.chunk(3, 1)
    log_sigma = log_sigma.clamp(-7, 3)
    log_comp = -0.5 * ((z[:, None] - mu) / log_sigma.exp()) ** 2 - log_sigma - 0.5 * math.log(2 * math.pi)
    return -torch.logsumexp(F.log_softmax(logits, 1) + log_comp, 1).mean()


def photoz_mixture_density_network(
    path: str, epochs: int = 25, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Photometric redshifts by a mixture density network, as survey teams fit them (D'Isanto
    and Polsterer; the LSST photo-z challenges): ugriz fluxes turned into magnitudes with
    non-detections set to the band's one-sigma limit, plus the detection flags, standardized;
    a 10-64-64 tanh trunk and a head of five Gaussians (mixture logits, means, log widths), the
    mixture's negative log-likelihood written by hand with `logsumexp`, Adam 2e-3 with batches
    of 256 and `StepLR` halving every 10 epochs. The loss (an NLL of a density, so it goes
    negative) falls from about 0.5 to about -1.4; the validation sigma_NMAD of the mixture's
    mode ends near 0.03 with 12 % outliers (|dz| / (1 + z) > 0.15, mostly the colour-redshift
    degeneracies the mixture exists for)."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 97)
    flux, detected, z = _galaxy_catalogue(rng, 6000)
    sigma = 10 ** (-0.4 * (np.array([25.0, 25.5, 25.3, 24.8, 24.0]) - 30)) / 5
    if bug == "log_zero_nan":  # bug: the magnitudes taken straight from the catalogue's fluxes
        mags = -2.5 * np.log10(flux) + 30
    else:
        mags = -2.5 * np.log10(np.maximum(flux, sigma)) + 30
    features = np.concatenate([mags, detected.astype(np.float64)], 1)
    mean, std = features[:5000].mean(0), features[:5000].std(0) + 1e-8
    x = torch.from_numpy((features - mean) / std).float()
    y = torch.from_numpy(z).float()
    model = nn.Sequential(_mlp([10, 64, 64], nn.Tanh, last_act=True), nn.Linear(64, 15))
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.5)
    loader = DataLoader(TensorDataset(x[:5000], y[:5000]), batch_size=256, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, zb in loader:
            optimizer.zero_grad()
            loss = _mdn_nll(model(xb), zb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        if epoch % 5 == 4:
            model.eval()
            with torch.no_grad():
                params = model(x[5000:])
                valid = _mdn_nll(params, y[5000:]).item()
            logits, mu, _ = params.chunk(3, 1)
            mode = mu.gather(1, logits.argmax(1, keepdim=True)).squeeze(1)
            dz = ((mode - y[5000:]) / (1 + y[5000:])).numpy()
            nmad = 1.4826 * np.median(np.abs(dz - np.median(dz)))
            print(
                f"epoch {epoch}: valid NLL {valid:.3f} sigma_NMAD {nmad:.4f} outliers {np.mean(np.abs(dz) > 0.15):.3f}"
            )
    hook.close()
    return losses


# ============================================================================= jet tagging, particle flow network


def _jets(
    rng: np.random.Generator, n: int, max_particles: int = 48
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Jets as sets of constituents (momentum fraction, delta eta, delta phi about the jet axis),
    zero-padded to `max_particles` with a mask: light-quark jets (a few fewer, harder, narrower
    constituents), gluon jets (more, softer, wider), boosted top jets (three prongs 0.05 to 0.3
    from the axis sharing the momentum), all with a soft uniform underlying event."""
    label = rng.integers(0, 3, n)
    parts = np.zeros((n, max_particles, 3), np.float32)
    mask = np.zeros((n, max_particles), np.float32)
    for j in range(n):
        if label[j] == 2:
            share = rng.dirichlet([3, 3, 3])
            angle = rng.uniform(0, 2 * np.pi) + np.array([0, 2.1, 4.2]) + rng.normal(0, 0.4, 3)
            dist = rng.uniform(0.05, 0.3, 3)
            centres = np.stack([dist * np.cos(angle), dist * np.sin(angle)], 1)
            counts = 1 + rng.poisson(7, 3)
            z = np.concatenate(
                [s * rng.dirichlet(0.6 * np.ones(c)) for s, c in zip(share, counts, strict=True)]
            )
            where = np.concatenate(
                [ctr + rng.normal(0, 0.06, (c, 2)) for ctr, c in zip(centres, counts, strict=True)]
            )
        else:
            quark = label[j] == 0
            count = 2 + rng.poisson(14 if quark else 18)
            z = rng.dirichlet((0.55 if quark else 0.45) * np.ones(count))
            where = rng.normal(0, 0.1 if quark else 0.13, (count, 2)) / np.sqrt(1 + 10 * z[:, None])
        soft = rng.poisson(6)
        z = np.concatenate([0.97 * z, 0.03 * rng.dirichlet(np.ones(soft + 1))[:soft]])
        where = np.concatenate([where, rng.uniform(-0.4, 0.4, (soft, 2))])
        k = min(len(z), max_particles)
        order = np.argsort(-z)[:k]
        parts[j, :k, 0], parts[j, :k, 1:] = z[order], where[order]
        mask[j, :k] = 1
    return parts, mask, label


class _ParticleFlowNetwork(nn.Module):
    """Komiske, Metodiev and Thaler's particle flow network: a per-particle map Phi, a masked
    sum over the jet's constituents, and a map F of the sum to the class logits."""

    def __init__(self, latent: int = 32, n_classes: int = 3, softmax_output: bool = False) -> None:
        super().__init__()
        self.phi = _mlp([3, 64, 64, latent], nn.ReLU, last_act=True)
        head: list[nn.Module] = [_mlp([latent, 64, 64, n_classes], nn.ReLU)]
        if softmax_output:
            head.append(nn.Softmax(dim=1))
        self.f = nn.Sequential(*head)

    def forward(self, particles: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.f((self.phi(particles) * mask.unsqueeze(-1)).sum(1))


def jet_tagging_particle_flow_network(
    path: str, epochs: int = 10, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Quark, gluon and top jet tagging with a particle flow network as in the EnergyFlow
    examples: constituents' momentum fractions and angles (scaled by the jet radius 0.4, the
    fractions multiplied by 10), `_ParticleFlowNetwork`, `nn.CrossEntropyLoss`, Adam 1e-3 with
    batches of 128, 4000 jets to train and 1000 to validate, the accuracy and the top-versus-rest
    AUC each epoch. The loss falls from log 3 (1.1) to about 0.45, a validation accuracy near
    78 % (quark and gluon jets overlap) and a top-versus-rest AUC near 0.97."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 101)
    parts, mask, label = _jets(rng, 5000)
    parts[..., 0] *= 10
    parts[..., 1:] /= 0.4
    x, m, y = torch.from_numpy(parts), torch.from_numpy(mask), torch.from_numpy(label)
    model = _ParticleFlowNetwork(
        softmax_output=bug == "softmax_before_ce"
    )  # bug: probabilities "for the ROC"
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(
        TensorDataset(x[:4000], m[:4000], y[:4000]), batch_size=128, shuffle=True, generator=g
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for xb, mb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb, mb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            out = model(x[4000:], m[4000:])
        acc = (out.argmax(1) == y[4000:]).float().mean().item()
        score = out[:, 2].numpy()
        top = (y[4000:] == 2).numpy()
        auc = (score[top][:, None] > score[~top][None]).mean()
        if epoch % 3 == 0 or epoch == epochs - 1:
            print(f"epoch {epoch}: loss {loss.item():.4f} valid accuracy {acc:.3f} top AUC {auc:.3f}")
    hook.close()
    return losses


# ============================================================================= tensor basis neural network


def _tensor_basis(s: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pope's ten integrity-basis tensors (n, 10, 3, 3) and five invariants (n, 5) of the
    normalized mean strain rate `s` and rotation rate `r`."""
    eye = torch.eye(3).expand_as(s)

    def tr(a: torch.Tensor) -> torch.Tensor:
        return a.diagonal(dim1=1, dim2=2).sum(1)[:, None, None]

    s2, r2 = s @ s, r @ r
    basis = [
        s,
        s @ r - r @ s,
        s2 - eye * tr(s2) / 3,
        r2 - eye * tr(r2) / 3,
        r @ s2 - s2 @ r,
        r2 @ s + s @ r2 - eye * tr(s @ r2) * 2 / 3,
        r @ s @ r2 - r2 @ s @ r,
        s @ r @ s2 - s2 @ r @ s,
        r2 @ s2 + s2 @ r2 - eye * tr(s2 @ r2) * 2 / 3,
        r @ s2 @ r2 - r2 @ s2 @ r,
    ]
    invariants = torch.cat([tr(s2), tr(r2), tr(s2 @ s), tr(r2 @ s), tr(r2 @ s2)], 1).squeeze(-1)
    return torch.stack(basis, 1), invariants


class _TBNN(nn.Module):
    """Ling, Kurzawski and Templeton's tensor basis neural network: an MLP from the five
    invariants to ten coefficients g_n, and the anisotropy b = sum_n g_n T_n, Galilean and
    rotation invariant by construction; eight hidden layers of 30 units as in the paper."""

    def __init__(self, act: type[nn.Module] = nn.LeakyReLU) -> None:
        super().__init__()
        self.coefficients = _mlp([5] + [30] * 8 + [10], act)

    def forward(self, invariants: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
        return torch.einsum("nk,nkij->nij", self.coefficients(invariants), basis)


def tbnn_reynolds_stress_anisotropy(
    path: str, epochs: int = 12, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A data-driven RANS closure: the Reynolds-stress anisotropy b learned from mean-flow
    gradients with a TBNN (Ling et al. 2016). Points of a flow database are mimicked by random
    normalized strain and rotation tensors over a range of magnitudes, and b comes from an
    explicit algebraic stress model (coefficients of the first four basis tensors that fall off
    with the strain and rotation invariants) plus 5 % noise standing for DNS statistics; the
    invariants are standardized, the loss is `nn.MSELoss` over the nine components of b, Adam
    1e-3 with batches of 64. The loss falls from about 0.01 to about 5e-5; the validation RMSE of
    b ends near 0.006, a quarter of the linear eddy-viscosity model's (b = -0.09 S)."""
    g = _seed(seed)

    def flow_points(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        scale = torch.exp(torch.empty(n, 1, 1).uniform_(math.log(0.2), math.log(1.0), generator=g))
        a = torch.randn(n, 3, 3, generator=g) * scale
        s = 0.5 * (a + a.transpose(1, 2))
        s = s - torch.eye(3) * s.diagonal(dim1=1, dim2=2).sum(1)[:, None, None] / 3
        w = torch.randn(n, 3, 3, generator=g) * scale * torch.rand(n, 1, 1, generator=g) * 1.5
        r = 0.5 * (w - w.transpose(1, 2))
        basis, inv = _tensor_basis(s, r)
        eta1, eta2 = inv[:, 0], -inv[:, 1]
        denom = 1 + 0.25 * eta1 + 0.15 * eta2
        coef = torch.zeros(n, 10)
        coef[:, 0] = -0.09 * (1 + 0.5 * torch.tanh(eta2 - eta1)) / denom.sqrt()
        coef[:, 1] = 0.06 / denom
        coef[:, 2] = 0.05 / (1 + 0.3 * eta1)
        coef[:, 3] = -0.03 * torch.tanh(eta2)
        b = torch.einsum("nk,nkij->nij", coef, basis)
        b = b + 0.05 * b.std() * torch.randn(b.shape, generator=g)
        return inv, basis, b

    inv, basis, b = flow_points(5000)
    mean, std = inv[:4000].mean(0), inv[:4000].std(0)
    inv = (inv - mean) / std
    model = _TBNN(
        nn.Sigmoid if bug == "deep_sigmoid" else nn.LeakyReLU
    )  # bug: the paper's depth with sigmoids
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(
        TensorDataset(inv[:4000], basis[:4000], b[:4000]), batch_size=64, shuffle=True, generator=g
    )
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        for ib, tb, bb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(ib, tb), bb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch % 3 == 2:
            model.eval()
            with torch.no_grad():
                rmse = loss_fn(model(inv[4000:], basis[4000:]), b[4000:]).sqrt().item()
            linear = loss_fn(-0.09 * basis[4000:, 0], b[4000:]).sqrt().item()
            print(
                f"epoch {epoch}: loss {loss.item():.2e} valid RMSE {rmse:.4f} (linear eddy viscosity {linear:.4f})"
            )
    hook.close()
    return losses


# ============================================================================= POD-NN reduced-order model


def pod_nn_advection_diffusion(path: str, epochs: int = 60, seed: int = 0) -> list[float]:
    """A non-intrusive reduced-order model, POD-NN (Hesthaven and Ubbiali 2018): 800 snapshots
    of a Gaussian pulse advected and diffused for one time unit on 256 points, over three
    parameters (diffusivity, speed, start), their proper orthogonal decomposition by SVD of the
    600 training snapshots (12 modes keep all but 1e-8 of the energy), and a 3-64-64-64-12 tanh
    MLP from the parameters in [0, 1] to the modal coefficients divided by the first mode's
    scale, `nn.MSELoss`, Adam 2e-3 with `ExponentialLR` (0.95 an epoch), batches of 32. The loss
    falls from about 0.1 to about 5e-4; the test fields' relative L2 error ends near 1.3 %,
    beside the modes' projection error (below 1e-4) that bounds it from below."""
    g = _seed(seed)
    x = torch.linspace(0, 4, 256)
    params = torch.rand(800, 3, generator=g)
    nu = 0.02 + 0.18 * params[:, :1]
    speed, start = 0.75 + 0.25 * params[:, 1:2], 0.9 + 0.25 * params[:, 2:3]
    width2 = 0.1**2 + 2 * nu
    fields = 0.1 / width2.sqrt() * torch.exp(-((x - start - speed) ** 2) / (2 * width2))
    train, test = fields[:600], fields[600:]
    mean_field = train.mean(0)
    _, singular, vt = torch.linalg.svd(train - mean_field, full_matrices=False)
    modes = vt[:12]
    scale = singular[0] / math.sqrt(600)
    coeffs = (fields - mean_field) @ modes.T / scale
    model = _mlp([3, 64, 64, 64, 12])
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.95)
    loader = DataLoader(TensorDataset(params[:600], coeffs[:600]), batch_size=32, shuffle=True, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        for pb, cb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(pb), cb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        if epoch % 15 == 14:
            print(f"epoch {epoch}: loss {loss.item():.2e}")
    with torch.no_grad():
        predicted = mean_field + (model(params[600:]) * scale) @ modes
    projected = mean_field + ((test - mean_field) @ modes.T) @ modes
    error = (torch.linalg.norm(predicted - test, dim=1) / torch.linalg.norm(test, dim=1)).mean()
    floor = (torch.linalg.norm(projected - test, dim=1) / torch.linalg.norm(test, dim=1)).mean()
    print(f"test relative L2 error {error:.4f} (projection onto the 12 modes {floor:.6f})")
    hook.close()
    return losses


_pinn_inverse = healthy(
    "pinn_inverse_oscillator_learned_damping", "PINN inverse problem", pinn_inverse_damped_oscillator
)
_gns = healthy(
    "gns_particles_radius_graph_noise_injection", "graph network simulator", gns_particles_noise_injection
)

_fe = healthy("fe_tapered_cantilever_surrogate_mlp", "finite-element surrogate", fe_cantilever_surrogate_mlp)
_bifi = healthy(
    "bifidelity_transfer_frozen_trunk",
    "bi-fidelity surrogate (transfer learning)",
    bifidelity_transfer_learning,
)
_weather = healthy(
    "weather_unet_latitude_weighted_mse", "weather U-Net on a lat-lon grid", weather_unet_latitude_weighted
)
_raman = healthy(
    "raman_unmixing_cnn1d_derivative_snv", "Raman spectra unmixing 1-D CNN", raman_unmixing_cnn1d
)
_photoz = healthy(
    "photoz_mixture_density_network_ugriz", "photometric redshift MDN", photoz_mixture_density_network
)
_pfn = healthy(
    "jet_tagging_particle_flow_network",
    "jet tagging particle flow network",
    jet_tagging_particle_flow_network,
)
_tbnn = healthy("tbnn_reynolds_stress_anisotropy", "turbulence closure TBNN", tbnn_reynolds_stress_anisotropy)

PIPELINES = [
    _pinn_inverse,
    buggy(_pinn_inverse, "no_zero_grad"),
    healthy("pinn_helmholtz_2d_adam_then_lbfgs", "PINN (Adam, L-BFGS)", pinn_helmholtz_adam_then_lbfgs),
    _gns,
    buggy(_gns, "lr_x100"),
    healthy(
        "boltzmann_generator_realnvp_double_well",
        "Boltzmann generator (RealNVP)",
        boltzmann_generator_double_well,
    ),
    _fe,
    buggy(_fe, "inputs_x255"),
    _bifi,
    buggy(_bifi, "frozen_by_mistake"),
    _weather,
    buggy(_weather, "train_in_eval_mode"),
    _raman,
    buggy(_raman, "shuffled_labels"),
    _photoz,
    buggy(_photoz, "log_zero_nan"),
    _pfn,
    buggy(_pfn, "softmax_before_ce"),
    _tbnn,
    buggy(_tbnn, "deep_sigmoid"),
    healthy(
        "pod_nn_advection_diffusion_reduced_order", "POD-NN reduced-order model", pod_nn_advection_diffusion
    ),
]
