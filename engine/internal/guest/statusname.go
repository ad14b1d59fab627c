package guest

// StatusName names an ABI status (specs/abi.md): "denied" for StatusDenied;
// "" for StatusOK and for numbers that are no status.
func StatusName(status int32) string { return statusNames[status] }
