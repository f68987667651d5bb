package io.txhub.example;

import java.math.BigDecimal;
import java.util.Locale;
import org.springframework.dao.DuplicateKeyException;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/** {@code POST /orders?id=ID[&amount=12.50][&crash=fail|after-prepare|before-commit]}. */
@RestController
public class OrderController {
	private final OrderService orders;

	public OrderController(OrderService orders) {
		this.orders = orders;
	}

	@PostMapping("/orders")
	public ResponseEntity<String> place(@RequestParam("id") String id, @RequestParam(name = "amount", defaultValue = "12.50") BigDecimal amount,
		@RequestParam(name = "crash", defaultValue = "none") String crash) {
		OrderService.Crash c = OrderService.Crash.valueOf(crash.toUpperCase(Locale.ROOT).replace('-', '_'));
		try {
			orders.place(id, amount, c);
			return ResponseEntity.status(HttpStatus.CREATED).body("placed\n");
		} catch (DuplicateKeyException e) {
			// the order exists already, or a check-back declared it rolled back
			return ResponseEntity.status(HttpStatus.CONFLICT).body("not placed: a duplicate, or rolled back by a check-back\n");
		} catch (IllegalStateException e) {
			return ResponseEntity.status(HttpStatus.BAD_REQUEST).body("rolled back: " + e.getMessage() + "\n");
		}
	}
}
