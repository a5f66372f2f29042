"""`mldbg run -- python script.py`: unmodified scripts, written into tmp_path, recorded and watched."""

import json
import subprocess
import sys
import textwrap

import mldbg
from mldbg.store import layout, open_store

STOPPED = 86

PLAIN = """
import sys, time
import torch
from torch import nn
torch.set_num_threads(1)
torch.manual_seed(0)
lr, steps = float(sys.argv[1]), int(sys.argv[2])
x = torch.randn(64, 8)
y = (x[:, 0] > 0).long()
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
loss_fn = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=lr)
for step in range(steps):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    print("step", step, flush=True)
    time.sleep(0.02)
print("trained", flush=True)
"""


def script(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def mldbg_run(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "mldbg.cli.main", "run", *args], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def test_records_an_unmodified_script(tmp_path):
    out = tmp_path / "run"
    train = script(tmp_path, "train.py", PLAIN)
    done = mldbg_run("--out", str(out), "--save-interval", "1", "--rule", "exploding_tensor", "--",
                     sys.executable, train, "0.1", "20")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "trained"  # the script's own output passes through
    trial = mldbg.create_trial(out)
    assert trial.loaded_all_steps and trial.steps() == list(range(20))
    names = set(trial.tensor_names())
    assert {"0.weight", "2.bias", "gradient/0.weight", "CrossEntropyLoss_output_0"} <= names
    loss = trial.tensor("CrossEntropyLoss_output_0").values()
    assert float(loss[19]) < float(loss[0])  # it learned
    assert "20 checked" in done.stderr


def test_stops_a_broken_script_with_its_own_exit_code(tmp_path):
    out = tmp_path / "run"
    train = script(tmp_path, "train.py", PLAIN)
    done = mldbg_run("--out", str(out), "--rule", "exploding_tensor", "--stop", "--",
                     sys.executable, train, "1e12", "400")  # fmt: skip
    assert done.returncode == STOPPED, done.stderr
    printed = [line for line in done.stdout.splitlines() if line.startswith("step")]
    assert len(printed) < 100 and "trained" not in done.stdout
    assert "stopped by a rule: exploding_tensor" in done.stderr
    trial = mldbg.create_trial(out)
    assert trial.loaded_all_steps
    for name in trial.tensor_names():
        for step in trial.tensor(name).steps():
            trial.tensor(name).value(step)
    end = json.loads(open_store(out).read(layout.end_key("worker_0")))
    assert end["stopped"] is True


def test_compile_own_hooks_and_a_functional_loss(tmp_path):
    out = tmp_path / "run"
    train = script(
        tmp_path,
        "train.py",
        """
        import sys
        import torch
        import torch.nn.functional as F
        from torch import nn
        torch.set_num_threads(1)
        torch.manual_seed(0)
        x, y = torch.randn(32, 8), torch.randint(0, 2, (32,))
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        seen = []

        @torch.compiler.disable
        def own_hook(module, args, output):  # the script's own hook
            seen.append(output.shape)

        model[0].register_forward_hook(own_hook)
        compiled = torch.compile(model, backend="eager")
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        for step in range(12):
            opt.zero_grad()
            loss = F.cross_entropy(compiled(x), y)
            loss.backward()
            opt.step()
        assert len(seen) == 12, len(seen)
        print("own hook calls", len(seen))
        sys.exit(3)
    """,
    )
    done = mldbg_run("--out", str(out), "--save-interval", "1", "--rule", "exploding_tensor", "--",
                     sys.executable, train)  # fmt: skip
    assert done.returncode == 3, done.stderr  # the script's exit code
    assert "own hook calls 12" in done.stdout
    assert "Warning" not in done.stderr, done.stderr
    trial = mldbg.create_trial(out)
    assert trial.steps() == list(range(12))
    assert trial.tensor_names(collection="losses") == ["loss"]  # from loss.backward()
    assert "gradient/0.weight" in trial.tensor_names()


def test_ddp(tmp_path):
    out = tmp_path / "run"
    train = script(
        tmp_path,
        "train.py",
        f"""
        import torch
        import torch.distributed as dist
        from torch import nn
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method="file://{tmp_path / "rendezvous"}", rank=0, world_size=1)
        model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
        loss_fn = nn.CrossEntropyLoss()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(6):
            x, y = torch.randn(4, 4), torch.randint(0, 2, (4,))
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        dist.destroy_process_group()
    """,
    )
    done = mldbg_run("--out", str(out), "--save-interval", "1", "--no-watch", "--", sys.executable, train)
    assert done.returncode == 0, done.stderr
    trial = mldbg.create_trial(out)
    assert trial.steps() == list(range(6))
    assert {"0.weight", "gradient/0.weight", "CrossEntropyLoss_output_0"} <= set(trial.tensor_names())
