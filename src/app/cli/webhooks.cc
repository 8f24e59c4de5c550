// tollgate cli: `webhook …` — the client side of routes_webhooks.cc (admin key).

#include <boost/json.hpp>

#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "tollgate/client.h"

#include "app/cli/common.h"

namespace tollgate::app::cli {
namespace {

// `webhook show|enable|disable|rotate|delete ID`: one endpoint named, its connection options.
CLI::App* add_endpoint_command(CLI::App* webhook, const char* name, const char* what, Args& a) {
  auto* command = webhook->add_subcommand(name, what);
  command->add_option("ENDPOINT_ID", a.endpoint_id, "the endpoint's id (we_…)")->required()->check(kId);
  add_connection_options(command, a.connection);
  return command;
}

void add_status_command(CLI::App* webhook, int& exit_code, const char* status) {
  auto a = std::make_shared<Args>();
  const std::string name = std::string(status).substr(0, std::string(status).size() - 1);  // enable, disable
  const std::string what =
      name == "enable" ? "enable an endpoint: delivery resumes where it stopped, and its pending retries are made"
                       : "disable an endpoint: nothing is delivered to it until enabled";
  auto* command = add_endpoint_command(webhook, name.c_str(), what.c_str(), *a);
  command->callback([a, &exit_code, status, name] {
    client::UpdateWebhookEndpointRequest request;
    request.status = status;
    exit_code = run(
        "webhook " + name, a->connection,
        [&](Client& c) { return c.update_webhook_endpoint(a->endpoint_id, request); },
        [](const Response& r) { print_fields(r.json()); });
  });
}

void add_add_command(CLI::App* webhook, int& exit_code) {
  auto a = std::make_shared<Args>();
  auto* add = webhook->add_subcommand("add", "register an endpoint (enabled); its secret is shown only once");
  add->add_option("URL", a->url, "where to deliver: an http or https URL")->required();
  add->add_option("--event-type", a->event_types, "only events of this type (repeat for more; default: every type)");
  auto* of_account = add->add_option("--account", a->account_id, "only this account's events")->check(kId);
  auto* described = add->add_option("--description", a->description, "what the endpoint is for");
  add_connection_options(add, a->connection);
  add->callback([a, &exit_code, of_account, described] {
    client::CreateWebhookEndpointRequest request;
    request.url = a->url;
    request.event_types = a->event_types;
    if (of_account->count() > 0) request.account_id = a->account_id;
    if (described->count() > 0) request.description = a->description;
    exit_code = run(
        "webhook add", a->connection, [&](Client& c) { return c.create_webhook_endpoint(request); },
        [](const Response& r) {
          print_fields(r.json());
          note("webhook add", "the secret is shown only this once: store it where the receiver verifies signatures");
        });
  });
}

void add_list_command(CLI::App* webhook, int& exit_code) {
  auto a = std::make_shared<Args>();
  auto* list = webhook->add_subcommand("list", "list endpoints in the order they were made — never secrets");
  const PageOptions list_page = add_page_options(list, *a, "endpoint id");
  add_connection_options(list, a->connection);
  list->callback([a, &exit_code, list_page] {
    const client::PageRequest page = page_request(list_page, *a);
    exit_code = run(
        "webhook list", a->connection, [&](Client& c) { return c.list_webhook_endpoints(page); },
        [](const Response& r) {
          print_page("webhook list", r.json(), "endpoints", "endpoint_id",
                     {{"ENDPOINT_ID", false}, {"STATUS", false}, {"URL", false}, {"EVENT_TYPES", false},
                      {"ACCOUNT", false}, {"CREATED_AT", false}},
                     {"endpoint_id", "status", "url", "event_types", "account_id", "created_at"});
        });
  });
}

// `webhook deliveries ID`: one page of the endpoint's deliveries, newest event first. The status is
// checked here as well as by the server, so that a typo is a usage error and nothing is sent.
void add_deliveries_command(CLI::App* webhook, int& exit_code) {
  auto a = std::make_shared<Args>();
  auto* deliveries = add_endpoint_command(
      webhook, "deliveries", "each event's delivery to an endpoint, newest event first: attempts, last answer, next try",
      *a);
  auto* status = deliveries->add_option("--status", a->status, "only deliveries in this status")
                     ->check(CLI::IsMember({"pending", "delivered", "failed"}));
  const PageOptions list_page = add_page_options(deliveries, *a, "delivery's webhook id (evt_…)");
  deliveries->callback([a, &exit_code, status, list_page] {
    client::ListWebhookDeliveriesRequest request;
    if (status->count() > 0) request.status = a->status;
    request.page = page_request(list_page, *a);
    exit_code = run(
        "webhook deliveries", a->connection,
        [&](Client& c) { return c.list_webhook_deliveries(a->endpoint_id, request); },
        [](const Response& r) {
          print_page("webhook deliveries", r.json(), "deliveries", "webhook_id",
                     {{"WEBHOOK_ID", false}, {"TYPE", false}, {"ACCOUNT", false}, {"STATUS", false},
                      {"ATTEMPTS", true}, {"LAST_CODE", true}, {"LAST_ERROR", false}, {"NEXT_ATTEMPT_AT", false}},
                     {"webhook_id", "event_type", "account_id", "status", "attempts", "last_status_code", "last_error",
                      "next_attempt_at"});
        });
  });
}

// `webhook replay ID --after N`: the endpoint's cursor back to N; the server answers 202 and sends.
void add_replay_command(CLI::App* webhook, int& exit_code) {
  auto a = std::make_shared<Args>();
  auto* replay = add_endpoint_command(
      webhook, "replay", "send an endpoint every event it wants after a feed cursor again (same webhook-ids)", *a);
  replay
      ->add_option("--after", a->after,
                   "the feed cursor: events after this event id are sent again (0: the whole feed)")
      ->required()
      ->transform(integer_range(0, std::numeric_limits<std::int64_t>::max()));
  replay->callback([a, &exit_code] {
    exit_code = run(
        "webhook replay", a->connection,
        [&](Client& c) { return c.replay_webhook_endpoint(a->endpoint_id, a->after); },
        [&](const Response& r) {
          std::printf("webhook endpoint %s: replaying the events after %lld\n", a->endpoint_id.c_str(),
                      static_cast<long long>(a->after));
          print_fields(r.json());
          note("webhook replay", "follow it with: tollgate webhook deliveries " + a->endpoint_id);
        });
  });
}

}  // namespace

void add_webhook_commands(CLI::App& app, int& exit_code) {
  std::shared_ptr<Args> a;
  auto* webhook = app.add_subcommand("webhook", "register, list, change and delete webhook endpoints; see and replay their deliveries (admin key)");
  webhook->require_subcommand(1);
  add_add_command(webhook, exit_code);
  add_list_command(webhook, exit_code);

  a = std::make_shared<Args>();
  auto* show = add_endpoint_command(webhook, "show", "show one endpoint (never its secret)", *a);
  show->callback([a, &exit_code] {
    exit_code = run(
        "webhook show", a->connection, [&](Client& c) { return c.get_webhook_endpoint(a->endpoint_id); },
        [](const Response& r) { print_fields(r.json()); });
  });

  add_status_command(webhook, exit_code, "enabled");
  add_status_command(webhook, exit_code, "disabled");

  a = std::make_shared<Args>();
  auto* rotate = add_endpoint_command(
      webhook, "rotate", "give an endpoint a new secret; the old one keeps signing beside it for 24 h", *a);
  rotate->callback([a, &exit_code] {
    exit_code = run(
        "webhook rotate", a->connection, [&](Client& c) { return c.rotate_webhook_secret(a->endpoint_id); },
        [](const Response& r) {
          print_fields(r.json());
          note("webhook rotate", "the new secret is shown only this once; the old one signs beside it for 24 h");
        });
  });

  add_deliveries_command(webhook, exit_code);
  add_replay_command(webhook, exit_code);

  a = std::make_shared<Args>();
  auto* remove = add_endpoint_command(webhook, "delete", "delete an endpoint: nothing more is delivered to it", *a);
  remove->callback([a, &exit_code] {
    exit_code = run(
        "webhook delete", a->connection, [&](Client& c) { return c.delete_webhook_endpoint(a->endpoint_id); },
        [&](const Response& r) {
          std::printf("webhook endpoint %s deleted\n", a->endpoint_id.c_str());
          print_fields(r.json());
        });
  });
}

}  // namespace tollgate::app::cli
