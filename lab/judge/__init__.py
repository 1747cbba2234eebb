"""judge: expected against observed, per connection and per probe."""
