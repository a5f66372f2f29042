"""Reinforcement learning on small NumPy environments written here: a cart-pole (the classic
control equations), a contextual bandit and a gridworld; REINFORCE with a baseline and
advantage actor-critic."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from mldbg.torch import Hook

from . import buggy, healthy

torch.set_num_threads(1)


class CartPole:
    """Barto, Sutton and Anderson's cart-pole, integrated with Euler steps of 0.02 s; reward 1
    per step until the pole falls past 12 degrees, the cart leaves the track, or `limit` steps."""

    def __init__(self, seed: int, limit: int = 200):
        self.rng = np.random.default_rng(seed)
        self.limit = limit

    def reset(self) -> np.ndarray:
        self.s = self.rng.uniform(-0.05, 0.05, 4)
        self.t = 0
        return self.s.astype(np.float32)

    def step(self, action: int) -> tuple[np.ndarray, float, bool]:
        x, v, th, w = self.s
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(th), math.sin(th)
        temp = (force + 0.05 * w * w * sin) / 1.1
        acc_th = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos * cos / 1.1))
        acc_x = temp - 0.05 * acc_th * cos / 1.1
        self.s = np.array([x + 0.02 * v, v + 0.02 * acc_x, th + 0.02 * w, w + 0.02 * acc_th])
        self.t += 1
        done = abs(self.s[0]) > 2.4 or abs(self.s[2]) > 0.2095 or self.t >= self.limit
        return self.s.astype(np.float32), 1.0, done


def _returns(rewards: list[float], gamma: float) -> torch.Tensor:
    out, r = [], 0.0
    for x in reversed(rewards):
        r = x + gamma * r
        out.append(r)
    return torch.tensor(out[::-1])


class PolicyGradientLoss(nn.Module):
    """-mean(log pi(a|s) * advantage) - entropy_coef * entropy."""

    def __init__(self, entropy_coef: float = 0.0):
        super().__init__()
        self.entropy_coef = entropy_coef

    def forward(self, logits: torch.Tensor, actions: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
        dist = torch.distributions.Categorical(logits=logits)
        return -(dist.log_prob(actions) * advantages).mean() - self.entropy_coef * dist.entropy().mean()


def reinforce_cartpole(
    path: str,
    hidden: int = 32,
    lr: float = 1e-2,
    episodes_per_step: int = 2,
    steps: int = 60,
    gamma: float = 0.99,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """REINFORCE with normalized returns as the baseline, a few episodes per update, Adam."""
    torch.manual_seed(seed)
    env = CartPole(seed)
    policy = nn.Sequential(nn.Linear(4, hidden), nn.Tanh(), nn.Linear(hidden, 2))
    loss_fn = PolicyGradientLoss()
    if bug == "frozen_by_mistake":  # the optimizer is built, then the policy is re-created
        opt = torch.optim.Adam(policy.parameters(), lr=lr)
        policy = nn.Sequential(nn.Linear(4, hidden), nn.Tanh(), nn.Linear(hidden, 2))
    else:
        opt = torch.optim.Adam(policy.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed + 1)
    hook = Hook(path)
    hook.register_module(policy)
    hook.register_loss(loss_fn)
    lengths = []
    for _ in range(steps):
        states, actions, rets = [], [], []
        for _ in range(episodes_per_step):
            s, done, rewards = env.reset(), False, []
            while not done:
                states.append(s)
                with torch.no_grad():
                    probs = torch.softmax(policy(torch.from_numpy(s)[None]), -1)
                a = int(torch.multinomial(probs[0], 1, generator=g))
                actions.append(a)
                s, r, done = env.step(a)
                rewards.append(r)
            rets.append(_returns(rewards, gamma))
            lengths.append(len(rewards))
        ret = torch.cat(rets)
        adv = (ret - ret.mean()) / (ret.std() + 1e-8)
        opt.zero_grad()
        loss = loss_fn(policy(torch.from_numpy(np.stack(states))), torch.tensor(actions), adv)
        loss.backward()
        opt.step()
    hook.close()
    return [-float(x) for x in lengths]  # the "loss" the script watches: minus the episode length


class ActorCritic(nn.Module):
    def __init__(self, n_in: int, n_actions: int, hidden: int):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.actor = nn.Linear(hidden, n_actions)
        self.critic = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(x)
        return self.actor(h), self.critic(h).squeeze(-1)


class A2CLoss(nn.Module):
    def __init__(self, value_coef: float = 0.5, entropy_coef: float = 0.01):
        super().__init__()
        self.value_coef, self.entropy_coef = value_coef, entropy_coef

    def forward(self, logits, values, actions, returns):
        dist = torch.distributions.Categorical(logits=logits)
        adv = (returns - values).detach()
        policy = -(dist.log_prob(actions) * adv).mean()
        value = (returns - values).pow(2).mean()
        return policy + self.value_coef * value - self.entropy_coef * dist.entropy().mean()


class GridWorld:
    """`n_envs` copies of a `size` x `size` grid: start in a corner, +1 at the opposite corner, -0.01 per
    move; observations are one-hot positions; episodes end at the goal or after 30 moves."""

    def __init__(self, n_envs: int, seed: int, size: int = 5):
        self.n, self.size = n_envs, size
        self.rng = np.random.default_rng(seed)
        self.pos = np.zeros((n_envs, 2), dtype=np.int64)
        self.t = np.zeros(n_envs, dtype=np.int64)

    def obs(self) -> np.ndarray:
        o = np.zeros((self.n, self.size * self.size), dtype=np.float32)
        o[np.arange(self.n), self.pos[:, 0] * self.size + self.pos[:, 1]] = 1
        return o

    def step(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        moves = np.array([[0, 1], [1, 0], [0, -1], [-1, 0]])
        slip = self.rng.random(self.n) < 0.1
        a = np.where(slip, self.rng.integers(0, 4, self.n), a)
        self.pos = np.clip(self.pos + moves[a], 0, self.size - 1)
        self.t += 1
        goal = (self.pos == self.size - 1).all(1)
        reward = np.where(goal, 1.0, -0.01)
        done = goal | (self.t >= 6 * self.size)
        self.pos[done] = 0
        self.t[done] = 0
        return self.obs(), reward, done


def a2c(
    path: str,
    n_envs: int = 16,
    size: int = 5,
    n_steps: int = 5,
    hidden: int = 64,
    optimizer: str = "rmsprop",
    lr: float = 7e-4,
    steps: int = 250,
    gamma: float = 0.95,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """Synchronous advantage actor-critic over vectorized gridworlds, n-step bootstrapped
    returns, RMSprop (as in A2C) or Adam, gradient clipping at 0.5."""
    torch.manual_seed(seed)
    env = GridWorld(n_envs, seed, size)
    model = ActorCritic(size * size, 4, hidden)
    loss_fn = A2CLoss()
    lr = lr * (100 if bug == "lr_x100" else 1)
    if optimizer == "rmsprop":
        opt = torch.optim.RMSprop(model.parameters(), lr=lr, alpha=0.99, eps=1e-5)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed + 1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    obs = env.obs()
    losses, episode_reward = [], []
    for _ in range(steps):
        states, actions, rewards, dones = [], [], [], []
        for _ in range(n_steps):
            with torch.no_grad():
                logits, _ = model(torch.from_numpy(obs))
            a = torch.multinomial(torch.softmax(logits, -1), 1, generator=g).squeeze(1).numpy()
            states.append(obs)
            actions.append(a)
            obs, r, d = env.step(a)
            rewards.append(r)
            dones.append(d)
        with torch.no_grad():
            _, ret = model(torch.from_numpy(obs))
        returns = []
        for r, d in zip(reversed(rewards), reversed(dones), strict=True):
            ret = torch.from_numpy(r).float() + gamma * ret * torch.from_numpy(~d).float()
            returns.append(ret)
        returns = torch.stack(returns[::-1]).reshape(-1)
        opt.zero_grad()
        logits, values = model(torch.from_numpy(np.concatenate(states)))
        loss = loss_fn(logits, values, torch.from_numpy(np.concatenate(actions)), returns)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        losses.append(loss.item())
        episode_reward.append(-float(np.mean(rewards)))
    hook.close()
    return episode_reward


def contextual_bandit(
    path: str,
    arms: int = 6,
    d: int = 8,
    batch: int = 64,
    lr: float = 0.05,
    steps: int = 300,
    entropy: float = 0.01,
    seed: int = 0,
    bug: str | None = None,
) -> list[float]:
    """A linear contextual bandit (reward = Bernoulli(sigmoid(<theta_a, x>))) learned with a
    softmax policy, REINFORCE with a running-mean baseline and an entropy bonus, SGD."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=(arms, d)) * 1.5
    policy = nn.Linear(d, arms)
    loss_fn = PolicyGradientLoss(entropy)
    opt = torch.optim.SGD(policy.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed + 1)
    hook = Hook(path)
    hook.register_module(policy)
    hook.register_loss(loss_fn)
    baseline, regrets = 0.0, []
    for _ in range(steps):
        x = rng.normal(size=(batch, d)).astype(np.float32)
        logits = policy(torch.from_numpy(x))
        a = torch.multinomial(torch.softmax(logits.detach(), -1), 1, generator=g).squeeze(1).numpy()
        p = 1 / (1 + np.exp(-(x @ theta.T)))
        r = (rng.random(batch) < p[np.arange(batch), a]).astype(np.float32)
        baseline = 0.9 * baseline + 0.1 * float(r.mean())
        opt.zero_grad()
        loss = loss_fn(logits, torch.from_numpy(a), torch.from_numpy(r) - baseline)
        loss.backward()
        opt.step()
        regrets.append(float((p.max(1) - p[np.arange(batch), a]).mean()))
    hook.close()
    return regrets


_reinforce = healthy("reinforce_cartpole", "RL", reinforce_cartpole)
_a2c = healthy("a2c_gridworld_rmsprop", "RL", a2c)

PIPELINES = [
    _reinforce,
    _a2c,
    healthy(
        "a2c_gridworld6_adam",
        "RL",
        a2c,
        size=6,
        n_envs=8,
        n_steps=8,
        optimizer="adam",
        lr=1e-3,
        gamma=0.97,
        seed=1,
    ),
    healthy(
        "reinforce_cartpole_wide", "RL", reinforce_cartpole, hidden=64, lr=5e-3, episodes_per_step=3, seed=1
    ),
    healthy("bandit_reinforce_sgd", "RL", contextual_bandit),
    healthy(
        "bandit_reinforce_many_arms", "RL", contextual_bandit, arms=12, d=16, lr=0.1, entropy=0.0, seed=1
    ),
    buggy(_reinforce, "frozen_by_mistake"),
    buggy(_a2c, "lr_x100"),
]
