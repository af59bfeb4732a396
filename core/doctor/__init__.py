"""``stromboli doctor``: what is wrong with an install, one finding per line.

The checks are pure functions of a :class:`~stromboli.core.doctor.view.ClusterView` (the
objects and authorizer answers :mod:`~stromboli.core.doctor.collect` gathers from a live
cluster), so each can be tested on objects built in memory, and a malformed object becomes a
``FAIL`` naming it instead of a crash. One module per check family.
"""
