"""`python tests/fsdp_on_cpu.py <computerrl command>`: the CLI with accelerate's FSDP honoured on a CPU.

accelerate 1.15 selects FSDP only for GPU-like devices (`AcceleratorState.__init__` sets it inside its
MULTI_GPU/… branch), so on a CPU `accelerate launch --config_file configs/accelerate/fsdp.yaml` runs as
plain data parallel. torch's FSDP2 (`fully_shard`) itself works on a CPU over gloo: this switch lets the
tests run accelerate's own FSDP2 preparation, clipping, state saving and gathering here, as on GPUs."""

import sys

from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import DistributedType

_init = AcceleratorState.__init__


def _fsdp_on_cpu(self, *args, fsdp_plugin=None, **kwargs):
    _init(self, *args, fsdp_plugin=fsdp_plugin, **kwargs)
    if fsdp_plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
        self.distributed_type = PartialState._shared_state["distributed_type"] = DistributedType.FSDP
        self.fsdp_plugin = fsdp_plugin


AcceleratorState.__init__ = _fsdp_on_cpu

from computerrl.cli.main import app  # noqa: E402

sys.exit(app())
