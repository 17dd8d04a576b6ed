"""Output formats: one module per format. Renderers only format; they never compute sizes."""

FORMATS = ("table", "json", "csv", "markdown")
