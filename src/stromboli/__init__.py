"""Stromboli: a Volcano-compatible batch scheduling system for Kubernetes.

The code lives in the top-level folders ``core/``, ``integrations/`` and ``webhooks/``; this
package's entries link to them, so that an editable install is a plain path that type
checkers and editors follow, and a wheel holds ``stromboli.core`` and friends.
"""
