"""Built-in plugins, one module each; ``scheduler/builtins.py`` registers them."""
