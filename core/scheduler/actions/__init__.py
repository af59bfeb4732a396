"""Built-in actions, one module each; ``scheduler/builtins.py`` registers them."""
