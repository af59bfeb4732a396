"""Per-card device tracking for the ``deviceshare`` plugin.

A node's GPUs are tracked card by card (memory, cores, vGPU slots, MIG instances), rebuilt
every session from the node's registration (resources, annotations) and the device ids that
the scheduler wrote on the pods already on it, so a restarted scheduler knows which card holds
what. ``request`` reads what a pod asks for, ``gpushare`` is the legacy memory share,
``vgpu`` HAMi's model, ``mig`` the dynamic MIG geometries and ``inventory`` ties them to the
session's nodes.
"""
