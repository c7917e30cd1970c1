//! actix-web 4 with its defaults (a worker per core, each a single-threaded runtime; idle
//! keep-alive connections closed after 5 s). `actix_hello PORT`. `POST /` reads its body and
//! answers as `GET /` (actix-web closes a connection whose request body the handler left unread;
//! the other servers read or discard it themselves).
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, http::StatusCode, web};
use peer_routes::{Route, spin};

async fn serve(req: HttpRequest) -> HttpResponse {
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let route = Route::of(target);
    match route {
        Route::Cpu(d) => spin(d),
        Route::Sleep(d) => actix_web::rt::time::sleep(d).await,
        Route::Hello | Route::NotFound => {}
    }
    let status = match route {
        Route::NotFound => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    };
    HttpResponse::build(status)
        .content_type("text/plain")
        .body(route.body())
}

async fn post(_body: web::Bytes) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain")
        .body(Route::Hello.body())
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let port = peer_routes::port();
    eprintln!("actix-web listening on 127.0.0.1:{port}");
    HttpServer::new(|| {
        App::new()
            .route("/", web::post().to(post))
            .default_service(web::to(serve))
    })
    .bind(("127.0.0.1", port))?
    .run()
    .await
}
