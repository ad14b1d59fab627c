// Command shop serves the shop.
package main

import (
	"log"

	"shop/client"
)

func main() {
	c := client.NewOld(client.Options{Retries: 3})
	var _ *client.OldClient = c
	if _, err := OldClient.Fetch(c, "/health"); err != nil {
		log.Fatal(err)
	}
}
