"""partitions"""
