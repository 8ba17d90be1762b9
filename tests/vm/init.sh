#!/bin/busybox sh
# SPDX-License-Identifier: MIT
#
# /init of the haccel.ko test VM (busybox): load the DRM core and the disk
# drivers in the order the host worked out, load haccel.ko, then the
# foreign dma-buf exporters (order.extra), mount the ext4 data disk
# read-write (its writes go to a qemu snapshot), run every test binary,
# dump the kernel log, power off. Everything for the host goes to the second serial port, each test's
# KTAP between "HACCEL-VM: begin NAME UPTIME" and "HACCEL-VM: end NAME RC
# UPTIME".
/bin/busybox --install -s /bin
export PATH=/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
mount -t tmpfs tmpfs /tmp

out=/dev/ttyS1
stty -F $out raw -echo 2>/dev/null
exec >$out 2>&1

for m in $(cat /modules/order); do
	insmod /modules/$m.ko || echo "# insmod $m failed"
done
if insmod /modules/haccel.ko $(cat /modules/haccel.args 2>/dev/null); then
	echo "HACCEL-VM: loaded haccel.ko"
fi
for m in $(cat /modules/order.extra 2>/dev/null); do
	insmod /modules/$m.ko || echo "# insmod $m failed"
done

mkdir -p /mnt/data
mount -t ext4 /dev/vda /mnt/data && mkdir -p /mnt/data/scratch ||
	echo "# mounting the data disk failed"

export HACCEL_VM_GUEST=1
export HACCEL_MODULE=/modules/haccel.ko
export HACCEL_VM_DATA=/mnt/data/weights.bin
export HACCEL_VM_CHECKPOINT=/mnt/data/model.safetensors
export HACCEL_VM_SCRATCH=/mnt/data/scratch
[ -x /tests/haccel-ctl ] && export HACCEL_CTL=/tests/haccel-ctl
[ -f /tests/seed ] && export HACCEL_TEST_SEED=$(cat /tests/seed)
cd /tmp
for t in $(cat /tests/order); do
	echo "HACCEL-VM: begin $t $(cut -d' ' -f1 /proc/uptime)"
	/tests/$t
	echo "HACCEL-VM: end $t $? $(cut -d' ' -f1 /proc/uptime)"
done

echo "HACCEL-VM: dmesg"
dmesg
echo "HACCEL-VM: done"
sync
poweroff -f
