"""The commands: each one's name -> its module in ``kvplan.cli``, in the order the help lists them (no module is
imported here: the entry point imports only the one it runs)."""

COMMANDS = {"estimate": "estimate", "models": "models", "schema": "schema", "spec": "spec", "max-batch": "max_batch",
            "fit": "fit", "report": "report", "gpus": "gpus", "check": "check", "verify": "verify", "log": "log",
            "mcp": "mcp"}
