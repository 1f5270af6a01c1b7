"""Strom controller service: election, cluster metadata in etcd, topic administration."""
