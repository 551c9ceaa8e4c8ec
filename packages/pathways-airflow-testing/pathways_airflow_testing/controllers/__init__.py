"""Controllers of the local cluster: each turns objects into the objects and status they imply."""
