"""A 2-process CPU DDP fit with `mldbg.lightning.DebuggerCallback(include_workers="all")`:
`python lightning_ddp_job.py OUT`. Lightning's launcher runs this script again for rank 1."""

import sys
import warnings

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import mldbg
from mldbg.lightning import DebuggerCallback

warnings.filterwarnings("ignore")


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main(out_dir: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(128, 8, generator=torch.Generator().manual_seed(0))
    data = DataLoader(TensorDataset(x, x[:, :3].argmax(1)), batch_size=16)  # 4 batches per rank
    callback = DebuggerCallback(
        out_dir, save_config=mldbg.SaveConfig(save_interval=1), include_workers="all",
        include_collections=["weights", "gradients", "losses"],
    )  # fmt: skip
    trainer = pl.Trainer(
        max_epochs=1, accelerator="cpu", devices=2, strategy="ddp", callbacks=[callback], logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.fit(Tiny(), data)
    print(f"rank {trainer.global_rank} steps {trainer.global_step}")


if __name__ == "__main__":
    main(sys.argv[1])
