// Package orders reads orders.
package orders

import "shop/client"

// Order returns order id.
func Order(c *client.OldClient, id string) ([]byte, error) {
	return OldClient.Fetch(c, "/orders/"+id)
}
