"""Reading engine start-up logs: what vLLM, SGLang, TensorRT-LLM and llama.cpp measured and allocated.

``parse_log(path_or_stream)`` -> :class:`ParsedLog` (typed, bytes as ints, unknown as None; never raises on
the content, reads at most ``MAX_LOG_BYTES``). ``kvplan.logs.compare`` puts kvplan's prediction beside it;
``kvplan.logs.calibration`` turns it into a calibration file that ``max-batch`` and ``check`` use.
"""

from kvplan.logs.core import MAX_LOG_BYTES, Logged
from kvplan.logs.model import LogSettings, ParsedLog
from kvplan.logs.parse import detect, parse_log, parse_text

__all__ = ["MAX_LOG_BYTES", "Logged", "LogSettings", "ParsedLog", "detect", "parse_log", "parse_text"]
