"""One worker of `test_mxnet_dist`: `python dist_worker.py OUT_DIR`, with the DMLC_*
variables of a dist_sync job (role worker). Trains a small MLP for 5 steps through a
`dist_sync` kvstore, recorded by the hook with every worker's tensors; the rank comes from the
kvstore (set as RANK / WORLD_SIZE before the hook is made, which names the worker from them)."""

from __future__ import annotations

import os
import sys
import warnings

warnings.simplefilter("ignore")  # mxnet's own DeprecationWarnings

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from mxnet import autograd, gluon, nd  # noqa: E402

import mldbg  # noqa: E402
import mldbg.mxnet  # noqa: E402

STEPS, BATCH = 5, 8


def main(out_dir: str) -> None:
    kv = mx.kv.create("dist_sync")
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(kv.rank), str(kv.num_workers)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(8, activation="relu"), gluon.nn.Dense(3))
    mx.random.seed(0)
    net.initialize(mx.init.Xavier())
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv)
    rng = np.random.default_rng(kv.rank)  # each worker its own data
    every_step = mldbg.SaveConfig(save_interval=1)
    collections = ["weights", "biases", "gradients", "losses"]
    with mldbg.mxnet.Hook(
        out_dir, include_workers="all", save_config=every_step, include_collections=collections
    ) as hook:
        hook.register_block(net)
        hook.register_loss(loss_fn)
        for _ in range(STEPS):
            x = nd.array(rng.standard_normal((BATCH, 4)).astype("float32"))
            y = nd.array(rng.integers(0, 3, BATCH).astype("float32"))
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(BATCH)
    final = os.path.join(os.path.dirname(os.path.abspath(out_dir)), f"final_{kv.rank}.npy")  # beside the run
    np.save(final, net[0].weight.data().asnumpy())


if __name__ == "__main__":
    main(sys.argv[1])
