"""bridgectl: the command line around the bridges (add, start, stop, status, offsets, lite migrate), the local
stack's commands (`bridgectl local ...`, over local_stack/) and the one-command local product (`bridgectl dev`)."""
