"""The ``predicates`` plugin package: one module per kube-scheduler filter.

Importing the package registers the plugin.
"""

from stromboli.core.scheduler.plugins.predicates.plugin import PredicatesPlugin

__all__ = ["PredicatesPlugin"]
