package io.txhub.spring;

import io.txhub.Checkback;
import io.txhub.Producer;
import java.util.HashMap;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Auto-configuration from {@code txhub.*}: a {@link Producer}, a {@link TxhubTemplate} and, in a
 * servlet web application with a {@link TxhubCheckbackResolver} bean, the check-back endpoint.
 * Each bean backs off when the application defines its own.
 */
@AutoConfiguration
@EnableConfigurationProperties(TxhubProperties.class)
public class TxhubAutoConfiguration {
	/** @param props the properties @return the producer (closed with the context) */
	@Bean(destroyMethod = "close")
	@ConditionalOnMissingBean
	public Producer txhubProducer(TxhubProperties props) {
		return Producer.builder(props.getBrokers()).controlTopic(props.getControlTopic()).maxBytes(props.getMaxBytes())
			.timeoutMs(props.getTimeoutMs()).kafka(new HashMap<>(props.getKafka())).build();
	}

	/** @param producer the producer @param props the properties @return the template */
	@Bean
	@ConditionalOnMissingBean
	public TxhubTemplate txhubTemplate(Producer producer, TxhubProperties props) {
		return new TxhubTemplate(producer, props);
	}

	/** The check-back endpoint, on Spring MVC. */
	@Configuration(proxyBeanMethods = false)
	@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
	@ConditionalOnClass(name = "org.springframework.web.servlet.DispatcherServlet")
	@ConditionalOnBean(TxhubCheckbackResolver.class)
	@ConditionalOnProperty(prefix = "txhub.checkback", name = "enabled", matchIfMissing = true)
	static class CheckbackEndpointConfiguration {
		@Bean
		@ConditionalOnMissingBean
		Checkback txhubCheckback(TxhubCheckbackResolver resolver, TxhubProperties props) {
			return new Checkback(resolver, props.getCheckback().getSecret(), props.getCheckback().getWindow());
		}

		@Bean
		@ConditionalOnMissingBean
		TxhubCheckbackEndpoint txhubCheckbackEndpoint(Checkback checkback) {
			return new TxhubCheckbackEndpoint(checkback);
		}
	}
}
