package orders

// Status is where an order stands.
type Status int

// The states of an order.
const (
	Open Status = iota
	Paid
	Shipped
)
