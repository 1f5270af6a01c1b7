"""Strom storage node: partition logs on local disks, served over gRPC."""
