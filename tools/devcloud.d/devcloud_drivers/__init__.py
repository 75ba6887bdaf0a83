"""Stand-in drivers that let a real OpenStack control plane run on one
machine without hypervisors, agents or disks (tools/devcloud)."""
