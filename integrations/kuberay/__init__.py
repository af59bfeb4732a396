"""KubeRay: RayCluster, RayJob and RayService as Volcano gangs (``ray-<name>-pg``)."""
