"""``kvplan.verify``: allocate the caches an engine would hold, on a real device, and compare with the prediction.

    import kvplan.verify
    result = kvplan.verify.verify("gpt2", batch=2, context=1024, device="cpu")
    result.measured_storage_bytes == result.predicted_bytes

The tensors come from the same ``CacheLayout`` ``kvplan estimate`` reads (``kvplan.verify.shapes``);
torch is imported only when ``verify`` runs (``pip install 'kvplan[verify]'``). See docs/verification.md.
The run itself, step by step, is ``kvplan.verify.run``; the records it fills, ``kvplan.verify.results``.
"""

from __future__ import annotations

from kvplan.verify.errors import VerifyError
from kvplan.verify.results import DEFAULT_UTILIZATION  # noqa: F401 - kvplan.verify.DEFAULT_UTILIZATION, as before
from kvplan.verify.results import (BlockTableCheck, ComponentCheck, DecodeCheck, DecodeStepCheck, MaxBatchCheck,
                                   SharingCheck, VerifyResult)
from kvplan.verify.run import verify

__all__ = ["verify", "VerifyResult", "ComponentCheck", "MaxBatchCheck", "DecodeCheck", "DecodeStepCheck",
           "SharingCheck", "BlockTableCheck", "VerifyError"]
