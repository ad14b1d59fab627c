// Package billing reads invoices from the billing service.
package billing

import "shop/client"

// Invoice returns the invoice id as the billing service has it.
func Invoice(c *client.OldClient, id string) ([]byte, error) {
	return OldClient.Fetch(c, "/invoices/"+id)
}

// Refunds returns the refunds of invoice id.
func Refunds(c *client.OldClient, id string) ([]byte, error) {
	body, err := OldClient.Fetch(c, "/invoices/"+id+"/refunds")
	if err != nil {
		return nil, err
	}
	return body, nil
}
