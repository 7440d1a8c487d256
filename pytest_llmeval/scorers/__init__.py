"""Built-in scorers, one module per family. Modules are imported lazily by the registry."""
