"""Output formats: one module per format, one registry of which result prints in which (``formats.py``).
Renderers only format; they never compute sizes."""

from kvplan.render.formats import formats_for

FORMATS = formats_for("EstimateResult")
