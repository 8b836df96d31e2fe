# eventq for machines with a Docker engine (see docker-compose.yml).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY eventq ./eventq
COPY streams ./streams
RUN pip install --no-cache-dir .
EXPOSE 9922
ENTRYPOINT ["eventq"]
CMD ["serve", "--listen-host", "0.0.0.0"]
