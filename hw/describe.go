package hw

import "fmt"

// The Describe functions word an operation for errors and deadlock
// reports. Every backend uses them, so a report reads the same on the
// simulator and on a GPU.

// DescribeCopy describes a copy into dst.
func DescribeCopy(dst Slice) string { return fmt.Sprintf("copy %d x %s", dst.Len, dst.DType()) }

// DescribeReduce describes dst = op(dst, src).
func DescribeReduce(op ReduceOp, dst Slice) string {
	return fmt.Sprintf("reduce %s %d x %s", op, dst.Len, dst.DType())
}

// DescribeDivide describes dst = dst / n.
func DescribeDivide(dst Slice, n int) string {
	return fmt.Sprintf("divide %d x %s by %d", dst.Len, dst.DType(), n)
}

// DescribeSend describes a send of src to the device of rank peerRank.
func DescribeSend(src Slice, peerRank int, peer Device, tag uint64) string {
	return fmt.Sprintf("send %d x %s (%d bytes) to rank %d (%s) tag %#x", src.Len, src.DType(), src.Bytes(), peerRank, peer.Name(), tag)
}

// DescribeRecv describes a receive into dst from the device of rank
// peerRank.
func DescribeRecv(dst Slice, peerRank int, peer Device, tag uint64) string {
	return fmt.Sprintf("recv %d x %s (%d bytes) from rank %d (%s) tag %#x", dst.Len, dst.DType(), dst.Bytes(), peerRank, peer.Name(), tag)
}
